"""``adlnmt import`` and ``adlnmt publish`` (``adlnmt export --format hf-marian`` is ``adlnmt export``'s)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SOURCES = ("hf-marian",)


def cmd_import(args: argparse.Namespace) -> int:
    from adlnmt.describe import describe
    from adlnmt.interop.hf_import import import_marian

    imported = import_marian(Path(args.source), Path(args.out))
    if args.diagram:
        from adlnmt.diagram import write_diagram

        write_diagram(imported.model, args.diagram)
        print(f"diagram written to {args.diagram}", file=sys.stderr)
    print(describe(imported.model))
    missing = imported.vocabulary.missing
    note = f"; {len(missing)} sentencepiece pieces absent from vocab.json read as <unk>" if missing else ""
    print(f"\nimported {args.source} ({len(imported.mapping)} tensors mapped{note}) as the model directory {args.out}; "
          f"translate with --model {args.out}, fine-tune with adlnmt train --init-from {args.out}")  # fmt: skip
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from adlnmt.interop.publish import publish

    written = publish(Path(args.model), Path(args.out), args.checkpoint, args.onnx)
    print(f"published {args.model} ({args.checkpoint}) to {args.out}: {', '.join(written)}; upload with "
          f"huggingface-cli upload USER/NAME {args.out}")  # fmt: skip
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    importer = commands.add_parser("import", help="import a pretrained model (Hugging Face MarianMT / OPUS-MT)")
    importer.add_argument("source", metavar="DIR", help="the pretrained model's directory (config.json, weights, "
                          "source.spm, target.spm, vocab.json)")  # fmt: skip
    importer.add_argument("--from", dest="kind", required=True, choices=SOURCES, help="its format")
    importer.add_argument("--out", required=True, help="the model directory to create (must not exist)")
    importer.add_argument("--diagram", metavar="PATH", help="also draw the architecture to PATH (.svg, .png, .pdf)")
    importer.set_defaults(func=cmd_import)
    publish = commands.add_parser("publish", help="a Hub-ready folder with a model card (no upload)")
    publish.add_argument("model", metavar="MODEL", help="model directory")
    publish.add_argument("--out", required=True, help="the folder to create (must not exist)")
    publish.add_argument("--checkpoint", default="best", help="best, last, averaged or a .safetensors path")
    publish.add_argument("--onnx", action="store_true", help="also include the ONNX export (the onnx extra)")
    publish.set_defaults(func=cmd_publish)
