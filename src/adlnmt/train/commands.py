"""CLI subcommands of the training side: train, translate (greedy), score."""

from __future__ import annotations

import argparse
import json
import sys

from adlnmt.train.config import add_arguments, from_arguments


def cmd_train(args: argparse.Namespace) -> int:
    from adlnmt.train.trainer import Trainer

    Trainer(from_arguments(args)).train()
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    from adlnmt.metrics import read_lines
    from adlnmt.translator import Translator

    translator = Translator.load(args.model, args.checkpoint, args.device)
    lines = read_lines(args.input) if args.input else [line.rstrip("\r\n") for line in sys.stdin]
    outputs = translator.translate(lines, args.batch_size)
    text = "".join(line + "\n" for line in outputs)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from adlnmt.metrics import read_lines, score

    result = score(read_lines(args.hyp), read_lines(args.ref), args.hyp, args.ref)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"BLEU {result['bleu']:.2f}  ({result['bleu_signature']})")
        print(f"chrF {result['chrf']:.2f}  ({result['chrf_signature']})")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser("train", help="train a model on a prepared data directory (resumable)")
    add_arguments(train)
    train.set_defaults(func=cmd_train)

    translate = commands.add_parser("translate", help="translate raw text with a trained model (greedy)")
    translate.add_argument("--model", required=True, help="model directory")
    translate.add_argument("--input", help="input file (default: stdin)")
    translate.add_argument("--output", help="output file (default: stdout)")
    translate.add_argument("--checkpoint", default="best", help="best, last or a .safetensors path")
    translate.add_argument("--batch-size", type=int, default=64, help="sentences per batch")
    translate.add_argument("--device", default="cpu", help="cpu or cuda")
    translate.set_defaults(func=cmd_translate)

    score = commands.add_parser("score", help="corpus BLEU and chrF (sacreBLEU) of a hypothesis file")
    score.add_argument("--hyp", required=True, help="hypothesis file, one sentence per line")
    score.add_argument("--ref", required=True, help="reference file, aligned with --hyp")
    score.add_argument("--json", action="store_true", help="print one JSON object")
    score.set_defaults(func=cmd_score)
