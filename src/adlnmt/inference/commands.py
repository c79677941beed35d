"""`adlnmt translate`: raw text through a trained model, an ensemble or an export (:mod:`adlnmt.inference.translator`);
with an export run by CTranslate2 PyTorch is never imported."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from adlnmt.bounds import POSITIVE, SEED, at_least, flag_type
from adlnmt.data.corpus import write_output
from adlnmt.errors import UserError
from adlnmt.inference.engine import ENGINE_CHOICES

if TYPE_CHECKING:
    from adlnmt.inference.options import SearchOptions
    from adlnmt.inference.translator import Translation, Translator


def cmd_translate(args: argparse.Namespace) -> int:
    """Translate a file or stdin; with an export run by CTranslate2 PyTorch is never imported."""
    from adlnmt.data.corpus import decode_lines, read_lines
    from adlnmt.inference.options import SearchOptions, sampling_rule

    if args.sampling:
        sampling_rule(args.sampling)
    elif args.nbest > args.beam:
        raise UserError(f"need --nbest <= --beam, got --beam {args.beam} --nbest {args.nbest}")
    options = SearchOptions(
        beam=args.beam,
        nbest=args.nbest,
        batch_size=args.batch_size,
        length_penalty=args.length_penalty,
        max_len_ratio=args.max_len_ratio,
        incremental=not args.uncached,
        alignments=args.alignments,
        workers=args.workers,
        cuda_graphs=args.cuda_graphs,
        sampling=args.sampling,
        temperature=args.temperature,
        seed=args.seed,
    )
    translator = load_translator(args, options)
    translator.engine.check(options, bool(args.prefix))  # before reading the input
    lines = list(read_lines(args.input) if args.input else decode_lines(sys.stdin.buffer, "<stdin>"))
    started = time.perf_counter()
    found = translator.search(lines, options, list(read_lines(args.prefix)) if args.prefix else None)
    seconds = time.perf_counter() - started
    if args.nbest > 1 or args.alignments:
        records = (
            json_record(translator, i, line, hyps, args.alignments)
            for i, (line, hyps) in enumerate(zip(lines, found, strict=True))
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


def json_record(
    translator: Translator, index: int, line: str, hyps: list[Translation], alignments: bool
) -> dict[str, object]:
    """The JSON line of input line ``index`` (0-based): its hypotheses; with ``alignments`` also the source pieces
    the model read (markers and EOS included, as the HTTP API gives them) and each hypothesis' hard alignment
    (:func:`~adlnmt.inference.translator.hard_alignment`)."""
    from adlnmt.inference.translator import hard_alignment

    hypotheses = [hyp.to_dict() for hyp in hyps]
    if not (alignments and hyps):
        return {"line": index + 1, "hypotheses": hypotheses}
    pieces = translator.source_pieces(line)
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
    if args.engine != "torch":
        raise UserError(f"an ensemble runs on the torch engine, not {args.engine}")
    import torch

    from adlnmt.inference.ensemble import load_ensemble

    if args.threads:
        torch.set_num_threads(args.threads)
    models = args.model * len(checkpoints) if len(args.model) == 1 else args.model  # checkpoints of one model
    return load_ensemble(models, checkpoints, args.device, args.precision, args.combine)


def add_commands(commands: argparse._SubParsersAction) -> None:
    translate = commands.add_parser("translate", help="translate raw text with a trained model (beam search)")
    translate.add_argument(
        "--model",
        required=True,
        action="append",
        help="model directory, or an export directory (adlnmt export); repeated: an ensemble of the models",
    )
    translate.add_argument("--input", help="input file, one sentence per line (default: stdin)")
    translate.add_argument("--output", help="output file (default: stdout)")
    translate.add_argument(
        "--checkpoint",
        action="append",
        help="best (default), last, averaged or a .safetensors path; repeated: one per --model, or an ensemble of "
        "checkpoints of one model",
    )
    translate.add_argument(
        "--combine",
        default="log-linear",
        choices=("log-linear", "linear"),
        help="ensembles: average the members' log-probabilities (log-linear, default) or probabilities (linear)",
    )
    translate.add_argument(
        "--beam", type=flag_type(int, at_least(1)), default=5, help="beam size; 1 = greedy (default 5)"
    )
    translate.add_argument(
        "--nbest", type=flag_type(int, at_least(1)), default=1, help="hypotheses per input; >1 writes JSON lines"
    )
    translate.add_argument(
        "--batch-size", type=flag_type(int, at_least(1)), default=64, help="sentences per batch (default 64)"
    )
    translate.add_argument(
        "--length-penalty", type=flag_type(float, at_least(0)), default=1.0, help="GNMT α (default 1.0; 0 = none)"
    )
    translate.add_argument("--max-len-ratio", type=flag_type(float, at_least(0)), default=2.0,
                           help="longest output = ratio · source length + 10 (default 2.0)")  # fmt: skip
    translate.add_argument(
        "--alignments",
        action="store_true",
        help="write JSON lines with source-attention alignments (mean over layers and heads), the source pieces and "
        "hard alignments: 'i-j' pairs, source piece i (0-based, markers and EOS not counted) most attended by target "
        "piece j (EOS not counted), as fairseq's --print-alignment",
    )
    translate.add_argument("--uncached", action="store_true", help="re-feed the whole prefix every step (slow)")
    translate.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="CUDA: replay each decoder step from a captured CUDA graph (token-identical to eager)",
    )
    translate.add_argument(
        "--sampling",
        metavar="topk:K|topp:P",
        help="sample instead of searching: from the K most likely words, or the fewest whose probability reaches P; "
        "--nbest N samples per input (--beam is not used)",
    )
    translate.add_argument(
        "--temperature", type=flag_type(float, POSITIVE), default=1.0, help="sampling temperature (default 1.0)"
    )
    translate.add_argument(
        "--seed", type=flag_type(int, SEED), default=1, help="sampling seed: same seed, same samples (default 1)"
    )
    translate.add_argument(
        "--prefix", metavar="FILE", help="target prefixes, one per input line: each translation starts with its own"
    )
    translate.add_argument("--device", default="cpu", help="cpu or cuda")
    translate.add_argument(
        "--threads",
        type=flag_type(int, at_least(0)),
        default=0,
        help="CPU threads of the engine (default: torch's; other engines: every CPU)",
    )
    translate.add_argument(
        "--workers",
        type=flag_type(int, at_least(1)),
        default=1,
        help="CPU: decode the batches in N forked processes of 1 thread each (fastest with N = cores; default 1)",
    )
    translate.add_argument(
        "--precision",
        default="fp32",
        choices=("fp32", "bf16", "fp16", "int8"),
        help="fp32 (default); bf16/fp16 (fp16: CUDA only); int8: dynamic quantisation of linears and RNNs (CPU only)",
    )
    translate.add_argument(
        "--engine",
        default="torch",
        choices=ENGINE_CHOICES,
        help="torch (default); onnxruntime or ctranslate2: an export directory (adlnmt export --model M --format "
        "onnx|ctranslate2 --out DIR, then --model DIR); auto: the export's engine, or torch for a model directory "
        "(saying on stderr when an export would run it faster)",
    )
    translate.set_defaults(func=cmd_translate)
