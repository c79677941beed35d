"""`adlnmt translate`: raw text through a trained model, an ensemble or an export (:mod:`adlnmt.inference.translator`);
with an export run by CTranslate2 PyTorch is never imported."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from adlnmt.bounds import at_least, flag_type
from adlnmt.devices import check_cpu_count
from adlnmt.errors import DataError, UserError
from adlnmt.exits import said_on_sigterm
from adlnmt.flags import add_flags, from_flags
from adlnmt.inference.engine import ENGINE_CHOICES
from adlnmt.inference.options import SearchOptions
from adlnmt.store.atomic import is_stdio, path_flag, read_input, write_output

if TYPE_CHECKING:
    from adlnmt.inference.translator import Translation, Translator


def cmd_translate(args: argparse.Namespace) -> int:
    """Translate a file or stdin; with an export run by CTranslate2 PyTorch is never imported. SIGTERM says that
    nothing was written (the output is written once every line is translated)."""
    where = "stdout" if is_stdio(args.output) else args.output
    with said_on_sigterm(f"translation stopped; nothing written ({where} gets every line once all are translated)"):
        return translate_to_output(args)


def translate_to_output(args: argparse.Namespace) -> int:
    """``adlnmt translate``'s work: check the flags, load the model, translate, write the output, say how fast."""
    from adlnmt.data.corpus import read_lines
    from adlnmt.inference.constraints import read_constraints
    from adlnmt.inference.options import sampling_rule
    from adlnmt.inference.prefixes import warn_prefixes
    from adlnmt.store.atomic import check_writable
    from adlnmt.store.model_dir import files_read

    if args.sampling:
        sampling_rule(args.sampling)
    elif args.nbest > args.beam:
        raise UserError(f"need --nbest <= --beam, got --beam {args.beam} --nbest {args.nbest}")
    if problem := ignored_option(args):
        raise UserError(problem)
    for flag, path in (("--prefix", args.prefix), ("--constraints", args.constraints)):
        if path is not None and is_stdio(path):  # read_lines would look for a file named '-'
            raise UserError(f"{flag} -: {flag} reads a file, not standard input (--input's); give the file's path "
                            "(./- for a file named '-')")  # fmt: skip
    check_cpu_count("--threads", args.threads)
    check_cpu_count("--workers", args.workers)
    model_files = files_read(args.model, args.checkpoint or ())
    check_writable(args.output, inputs=(args.input, args.prefix, args.constraints, *model_files))  # before the search
    options = from_flags(SearchOptions, args)
    translator = load_translator(args, options)
    translator.check(options, bool(args.prefix), constraints=bool(args.constraints))  # before reading the input
    lines = list(read_input(args.input))
    constraints = None
    if args.constraints:
        constraints = read_constraints(read_lines(args.constraints), args.constraints, len(lines))
    prefixes = list(read_lines(args.prefix)) if args.prefix else None
    if prefixes is not None and len(prefixes) != len(lines):
        raise DataError(f"{len(prefixes):,} target prefixes for {len(lines):,} input lines: need one per input line",
                        args.prefix)  # fmt: skip
    started = time.perf_counter()
    encoded = [translator.encode(line, number) if line.strip() else None for number, line in enumerate(lines, 1)]
    if prefixes is not None:
        warn_prefixes(translator.data.tgt_vocab, encoded, prefixes, options, args.prefix)
    lexical, warnings = translator.encode_constraints(constraints)
    found = translator.search_encoded(encoded, options, prefixes, lexical)
    for warning in warnings + translator.unmet_warnings(lexical, found):
        print(f"warning: {warning}", file=sys.stderr)
    seconds = time.perf_counter() - started
    if args.nbest > 1 or args.alignments:
        records = (
            json_record(translator, i, ids, hyps, args.alignments)
            for i, (ids, hyps) in enumerate(zip(encoded, found, strict=True))
        )
        text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    else:
        text = "".join((hyps[0].text if hyps else "") + "\n" for hyps in found)
    write_output(args.output, text)
    translated = sum(1 for hyps in found if hyps)
    speed = translated / max(seconds, 1e-9)
    print(f"translated {translated:,} of {len(lines):,} lines in {seconds:.2f} s ({speed:,.1f} sentences/s, engine "
          f"{translator.engine_name}; loading before it not counted)", file=sys.stderr)  # fmt: skip
    return 0


def ignored_option(args: argparse.Namespace) -> str | None:
    """What a flag of ``adlnmt translate`` asks that the rest of the command would silently ignore, else None."""
    if not args.sampling:
        for name in ("temperature", "seed"):
            if getattr(args, name) != getattr(SearchOptions, name):
                return f"--{name} {getattr(args, name)} shapes sampling only: add --sampling topk:K or topp:P"
    if args.combine != "log-linear" and len(args.model) == 1 and len(args.checkpoint or ()) < 2:
        return f"--combine {args.combine} combines an ensemble: give several --model or --checkpoint"
    if args.cuda_graphs:  # the search would decode eagerly instead, with a Python warning
        if not args.device.startswith("cuda"):
            return f"--cuda-graphs replays decoder steps on a CUDA device: add --device cuda (not {args.device})"
        if not args.incremental:
            return "--cuda-graphs and --uncached do not go together (a graph replays the cached incremental step)"
        if args.alignments:
            return "--cuda-graphs and --alignments do not go together (alignments read every step's attention maps)"
    return None


def json_record(
    translator: Translator, index: int, ids: list[int] | None, hyps: list[Translation], alignments: bool
) -> dict[str, object]:
    """The JSON line of input line ``index`` (0-based; ``ids``: as encoded for the search, None when empty): its
    hypotheses; with ``alignments`` also the source pieces the model read (markers and EOS included, as the HTTP API
    gives them) and each hypothesis' hard alignment (:func:`~adlnmt.inference.translator.hard_alignment`)."""
    from adlnmt.inference.translator import hard_alignment

    hypotheses = [hyp.to_dict() for hyp in hyps]
    if not (alignments and hyps and ids):
        return {"line": index + 1, "hypotheses": hypotheses}
    pieces = translator.source_pieces(ids)
    first = 1 if translator.data.source_markers else 0
    for record, hyp in zip(hypotheses, hyps, strict=True):
        record["hard_alignment"] = hard_alignment(hyp, first, len(pieces) - first - 1)
    return {"line": index + 1, "source_pieces": pieces, "hypotheses": hypotheses}


def load_translator(args: argparse.Namespace, options: SearchOptions) -> Translator:
    """The translator of ``adlnmt translate``'s --model (one, or several: an ensemble) and --checkpoint flags, for
    a search with ``options`` (which ``--engine auto`` reads)."""
    from adlnmt.inference.translator import Translator

    checkpoints = args.checkpoint or ["best"]
    if len(args.model) == 1 and len(checkpoints) == 1:
        return Translator.load(args.model[0], checkpoints[0], args.device, args.precision, args.engine, options,
                               args.threads)  # fmt: skip
    if args.engine not in (None, "torch"):
        raise UserError(f"an ensemble runs on the torch engine, not {args.engine}")
    import torch

    from adlnmt.inference.ensemble import load_ensemble

    if args.threads:
        torch.set_num_threads(args.threads)
    models = args.model * len(checkpoints) if len(args.model) == 1 else args.model  # checkpoints of one model
    return load_ensemble(models, checkpoints, args.device, args.precision or "fp32", args.combine)


def add_commands(commands: argparse._SubParsersAction) -> None:
    translate = commands.add_parser("translate", help="translate raw text with a trained model (beam search)")
    translate.add_argument("--input", type=path_flag, help="input file, one sentence per line (default or -: stdin)")
    translate.add_argument("--output", type=path_flag, help="output file (default or -: stdout)")
    add_model_arguments(translate)
    add_flags(translate, SearchOptions)
    translate.add_argument(
        "--prefix",
        metavar="FILE",
        type=path_flag,
        help="target prefixes, one per input line: each translation starts with its own",
    )
    translate.add_argument(
        "--constraints",
        metavar="FILE",
        type=path_flag,
        help='lexical constraints, one JSON line per input line: {"include": [phrases], "exclude": [phrases]} (see '
        "docs/translating.md); torch engine only",
    )
    translate.set_defaults(func=cmd_translate)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags :func:`load_translator` reads: the model(s), checkpoints, ensemble combination, device, threads,
    precision and engine (``adlnmt translate``, ``adlnmt distill``)."""
    parser.add_argument(
        "--model",
        required=True,
        action="append",
        type=path_flag,
        help="model directory, or an export directory (adlnmt export); repeated: an ensemble of the models",
    )
    parser.add_argument(
        "--checkpoint",
        action="append",
        type=path_flag,
        help="best (default), last, averaged or a .safetensors path; repeated: one per --model, or an ensemble of "
        "checkpoints of one model",
    )
    parser.add_argument(
        "--combine",
        default="log-linear",
        choices=("log-linear", "linear"),
        help="ensembles: average the members' log-probabilities (log-linear, default) or probabilities (linear)",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--threads",
        type=flag_type(int, at_least(0)),
        default=0,
        help="CPU threads of the engine (default: torch's; other engines: every CPU); not used with --workers N > 1, "
        "where every engine searches on N workers of 1 thread each (N threads in all)",
    )
    parser.add_argument(
        "--precision",
        choices=("fp32", "bf16", "fp16", "int8"),
        help="fp32 (default; an export: as exported); bf16/fp16 (fp16: CUDA only); int8: dynamic quantisation of "
        "linears and RNNs (CPU only)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINE_CHOICES,
        help="default: torch for a model directory, the export's own engine for an export directory; torch; "
        "onnxruntime or ctranslate2: an export directory (adlnmt export --model M --format "
        "onnx|ctranslate2 --out DIR, then --model DIR); auto: the export's engine, or torch for a model directory "
        "(saying on stderr when an export would run it faster)",
    )
