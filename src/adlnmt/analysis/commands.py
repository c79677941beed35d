"""CLI subcommands of the analysis side: score (metrics, paired bootstrap), score-pairs (forced decoding),
contrastive, contrastive-suite."""

from __future__ import annotations

import argparse
import json
import sys

from adlnmt.bounds import SEED, at_least, flag_type
from adlnmt.errors import UserError
from adlnmt.flags import OneModel
from adlnmt.inference.engine import able
from adlnmt.store.atomic import STDIO, check_writable, path_flag, read_input


def cmd_score_pairs(args: argparse.Namespace) -> int:
    from adlnmt.analysis.forced import PairScorer
    from adlnmt.metrics import read_lines
    from adlnmt.store.atomic import write_output
    from adlnmt.store.model_dir import files_read

    check_writable(args.output, inputs=(args.source, args.target, *files_read([args.model], [args.checkpoint])))
    sources, targets = read_lines(args.source), read_lines(args.target)
    if len(sources) != len(targets):
        raise UserError(f"{args.source} has {len(sources)} lines but {args.target} has {len(targets)}")
    scorer = PairScorer.load(args.model, args.checkpoint, args.device, args.engine)
    scores = scorer.score(sources, targets, args.batch_size)
    records = ({"line": number, **score.to_dict(args.normalize)} for number, score in enumerate(scores, start=1))
    write_output(args.output, "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
    return 0


def cmd_contrastive(args: argparse.Namespace) -> int:
    from adlnmt.analysis.contrastive import evaluate_model, markdown_table
    from adlnmt.store.atomic import write_output
    from adlnmt.store.model_dir import files_read

    model_files = files_read([args.model], [args.checkpoint])
    check_writable(args.json, args.output, inputs=(args.suite, *model_files))  # before the scoring, which may take long
    result = evaluate_model(args.model, args.suite, args.checkpoint, args.device, args.batch_size, args.normalize,
                            args.resamples, args.seed, args.engine)  # fmt: skip
    table = markdown_table(result)
    if args.json:
        write_output(args.json, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    write_output(args.output, table)
    return 0


def cmd_contrastive_suite(args: argparse.Namespace) -> int:
    from adlnmt.analysis.contrastive import write_suite
    from adlnmt.metrics import read_lines

    if args.source and not args.reference:
        raise UserError("--source needs --reference (the suite's targets)")
    check_writable(args.output, inputs=(args.reference, args.source, *(args.lexicon or [])))
    references = read_lines(args.reference) if args.reference else []
    sources = read_lines(args.source) if args.source else [""] * len(references)
    if len(sources) != len(references):
        raise UserError(f"{args.source} has {len(sources)} lines but {args.reference} has {len(references)}")
    if args.kind == "agreement":
        from adlnmt.analysis.agreement import agreement_suite

        if not args.reference:
            raise UserError("contrastive-suite agreement needs --reference (English; --source: its sources)")
        items = agreement_suite(sources, references, [read_lines(path) for path in args.lexicon or []])
    else:
        from adlnmt.analysis.demo_suite import demo_items, demo_suite

        items = (
            demo_items(sources, references, args.size, args.seed)
            if args.reference
            else demo_suite(args.size, args.seed)
        )
    if not items:
        english = " (the agreement rule reads English references)" if args.kind == "agreement" else ""
        raise UserError(f"{args.reference}: no {args.kind} item found in its {len(references):,} lines{english}; "
                        f"{args.output} not written")  # fmt: skip
    write_suite(items, args.output)
    print(f"{len(items)} items written to {args.output}", file=sys.stderr)
    return 0


def _scoring_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        required=True,
        action=OneModel,
        type=path_flag,
        help="model directory, or a CTranslate2 export directory",
    )
    parser.add_argument(
        "--checkpoint", default="best", type=path_flag, help="best, last, averaged or a .safetensors path"
    )
    parser.add_argument(
        "--batch-size",
        type=flag_type(int, at_least(1)),
        default=64,
        help="pairs per batch, sorted by length (default 64)",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--engine",
        choices=able("scores"),
        help="default: torch for a model directory, ctranslate2 for a CTranslate2 export; torch; or ctranslate2 "
        "(score_batch; --model is then a CTranslate2 export: adlnmt export --model M --format ctranslate2 --out DIR)",
    )
    parser.add_argument("--normalize", action="store_true", help="score = mean log-probability per token")


RESAMPLES = 1000  # the paired bootstrap's default


def cmd_score(args: argparse.Namespace) -> int:
    from adlnmt.metrics import format_report, paired_bootstrap, parse_metrics, score

    if args.resamples is not None and not args.bootstrap:
        raise UserError("--resamples counts the paired bootstrap's resamples: it goes with --bootstrap HYP2")
    inputs = {"--hyp": args.hyp, "--ref": args.ref, "--bootstrap": args.bootstrap}
    if len(stdin := [flag for flag, path in inputs.items() if path == STDIO]) > 1:
        raise UserError(f"{' and '.join(stdin)} are both {STDIO}: only one input can be read from standard input")
    hyp, ref, hyp2 = ("<stdin>" if path == STDIO else path for path in inputs.values())
    metrics = parse_metrics(args.metrics)
    hypotheses, references = list(read_input(args.hyp)), list(read_input(args.ref))
    if args.bootstrap:
        second = list(read_input(args.bootstrap))
        resamples = args.resamples or RESAMPLES
        result = paired_bootstrap(hypotheses, second, references, metrics, resamples, names=(hyp, hyp2), ref_name=ref)
    else:
        result = score(hypotheses, references, metrics, hyp_name=hyp, ref_name=ref)
    print(json.dumps(result) if args.json else format_report(result))
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    score = commands.add_parser("score", help="BLEU, chrF, TER, METEOR, sentBLEU; paired bootstrap significance")
    score.add_argument("--hyp", required=True, type=path_flag, help="hypothesis file, one sentence per line (-: stdin)")
    score.add_argument("--ref", required=True, type=path_flag, help="reference file, aligned with --hyp (-: stdin)")
    score.add_argument("--metrics", default="bleu,chrf", help="comma-separated: bleu,chrf,ter,meteor,sentbleu")
    score.add_argument(
        "--bootstrap",
        metavar="HYP2",
        type=path_flag,
        help="second system: paired bootstrap resampling vs --hyp (-: stdin)",
    )
    score.add_argument(
        "--resamples", type=flag_type(int, at_least(1)), help=f"bootstrap resamples (default {RESAMPLES})"
    )
    score.add_argument("--json", action="store_true", help="print one JSON object")
    score.set_defaults(func=cmd_score)

    score_pairs = commands.add_parser(
        "score-pairs", help="forced decoding: the log-probability of given translations (JSON lines)"
    )
    _scoring_arguments(score_pairs)
    score_pairs.add_argument("--source", required=True, type=path_flag, help="source file, one sentence per line")
    score_pairs.add_argument("--target", required=True, type=path_flag, help="target file, aligned with --source")
    score_pairs.add_argument("--output", type=path_flag, help="output file (default or -: stdout)")
    score_pairs.set_defaults(func=cmd_score_pairs)

    contrastive = commands.add_parser(
        "contrastive", help="contrastive evaluation: how often the reference outscores its minimally wrong variants"
    )
    _scoring_arguments(contrastive)
    contrastive.add_argument(
        "--suite", required=True, type=path_flag, help="suite file, JSON lines (docs/contrastive.md)"
    )
    contrastive.add_argument("--output", type=path_flag, help="Markdown table (default or -: stdout)")
    contrastive.add_argument("--json", metavar="PATH", type=path_flag, help="also write the full result as JSON")
    contrastive.add_argument(
        "--resamples",
        type=flag_type(int, at_least(1)),
        default=RESAMPLES,
        help=f"bootstrap resamples (default {RESAMPLES})",
    )
    contrastive.add_argument("--seed", type=flag_type(int, SEED), default=1, help="bootstrap seed (default 1)")
    contrastive.set_defaults(func=cmd_contrastive)

    suite = commands.add_parser("contrastive-suite", help="generate a contrastive suite (JSON lines)")
    suite.add_argument(
        "kind",
        choices=("agreement", "demo"),
        help="agreement: English subject-verb agreement from --reference; demo: the demo language's agreement",
    )
    suite.add_argument(
        "--reference", type=path_flag, help="reference file (agreement: English; demo: optional, demo targets)"
    )
    suite.add_argument("--source", type=path_flag, help="its source file (aligned), copied into the suite")
    suite.add_argument(
        "--lexicon",
        action="append",
        type=path_flag,
        metavar="TEXT",
        help="agreement: more English text whose -ing forms tell verbs (e.g. the training side)",
    )
    suite.add_argument(
        "--size", type=flag_type(int, at_least(1)), default=500, help="demo: items at most (default 500)"
    )
    suite.add_argument(
        "--seed", type=flag_type(int, SEED), default=7, help="demo: seed of the pairs and the balancing (default 7)"
    )
    suite.add_argument("--output", type=path_flag, required=True, help="suite file to write")
    suite.set_defaults(func=cmd_contrastive_suite)
