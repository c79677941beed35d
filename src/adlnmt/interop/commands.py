"""``adlnmt import`` (``adlnmt export --format hf-marian`` is ``adlnmt export``'s; ``adlnmt publish``:
:mod:`adlnmt.publish`)."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path

from adlnmt.errors import UserError
from adlnmt.store.atomic import path_flag

SOURCES = ("hf-marian",)


def describe_command(config) -> str:
    """The ``adlnmt describe`` command line that shows the model of ``config`` (a ModelConfig)."""
    flags = ["--encoder", config.encoder, "--decoder", config.decoder, "--d-model", str(config.d_model), "--heads",
             str(config.heads), "--d-ff", str(config.ff_factor * config.d_model), "--dropout", f"{config.dropout:g}",
             "--src-vocab", str(config.src_vocab_size), "--tgt-vocab", str(config.tgt_vocab_size)]  # fmt: skip
    flags += ["--tie-output"] if config.tie_output else []
    flags += ["--tie-source"] if config.tie_source else []
    return shlex.join(["adlnmt", "describe", *flags])


def check_diagram(path: Path) -> None:
    """Refuse a ``--diagram`` path that cannot name a diagram, before anything is written."""
    from adlnmt.diagram import WRITERS

    if path.suffix.lower() not in WRITERS:
        raise UserError(f"{path}: --diagram is drawn as {', '.join(WRITERS)}, not '{path.suffix or 'no suffix'}'")
    if path.is_dir():
        raise UserError(f"{path}: --diagram names a folder, not a file")


def cmd_import(args: argparse.Namespace) -> int:
    from adlnmt.interop.hf_import import import_marian

    if args.diagram:
        check_diagram(Path(args.diagram))
    imported = import_marian(Path(args.source), Path(args.out))
    model = imported.model
    if args.diagram:
        from adlnmt.diagram import write_diagram

        try:
            write_diagram(model, args.diagram)
        except BaseException:  # the import is not done: its model directory (new, ours) goes too
            shutil.rmtree(args.out, ignore_errors=True)
            raise
        print(f"diagram written to {args.diagram}", file=sys.stderr)
    vocabularies = imported.vocabularies
    missing = {*vocabularies["src"].missing, *vocabularies["tgt"].missing}
    note = f"; {len(missing)} sentencepiece pieces absent from the vocabulary read as <unk>" if missing else ""
    sizes = (f"vocabularies {vocabularies['src'].size} (source) and {vocabularies['tgt'].size} (target)"
             if imported.separate else f"vocabulary {vocabularies['src'].size}")  # fmt: skip
    print(f"encoder: {model.canonical_encoder}\ndecoder: {model.canonical_decoder}\n"
          f"{model.parameter_count():,} parameters, {sizes}\n"
          f"imported {args.source} ({len(imported.mapping)} tensors mapped{note}) as the model directory {args.out}; "
          f"translate with --model {args.out}, fine-tune with adlnmt train --init-from {args.out}\n"
          f"layer tree: {describe_command(model.config)}")  # fmt: skip
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    importer = commands.add_parser("import", help="import a pretrained model (Hugging Face MarianMT / OPUS-MT)")
    importer.add_argument("source", metavar="DIR", type=path_flag, help="the pretrained model's directory "
                          "(config.json, weights, source.spm, target.spm, vocab.json)")  # fmt: skip
    importer.add_argument("--from", dest="kind", required=True, choices=SOURCES, help="its format")
    importer.add_argument("--out", required=True, type=path_flag, help="the model directory to create (must not exist)")
    importer.add_argument(
        "--diagram", metavar="PATH", type=path_flag, help="also draw the architecture to PATH (.svg, .png, .pdf)"
    )
    importer.set_defaults(func=cmd_import)
