"""The ``adlnmt`` command line. Every user error exits with status 2 and one clear message."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from adlnmt.adl.errors import ADLError
from adlnmt.errors import UserError


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoder", required=True, help="encoder ADL chain, e.g. 'pos -> repeat(6, ...) -> norm'")
    parser.add_argument("--decoder", required=True, help="decoder ADL chain")
    parser.add_argument("--d-model", type=int, default=512, help="model width (default 512)")
    parser.add_argument("--heads", type=int, default=8, help="default attention heads (default 8)")
    parser.add_argument("--dropout", type=float, default=0.1, help="default dropout rate (default 0.1)")
    parser.add_argument("--ff-factor", type=int, default=4, help="ffl hidden width = factor · d_in (default 4)")
    parser.add_argument("--max-len", type=int, default=1024, help="learn_pos table size (default 1024)")
    parser.add_argument(
        "--var", action="append", default=[], metavar="NAME=VALUE", help="value of an ADL $NAME variable (repeatable)"
    )
    parser.add_argument("--src-vocab", type=int, default=8000, help="source vocabulary size (default 8000)")
    parser.add_argument("--tgt-vocab", type=int, default=8000, help="target vocabulary size (default 8000)")
    parser.add_argument("--input-feeding", action="store_true", help="z0_t = [z^L_(t-1); E y_t] (Luong)")
    parser.add_argument("--tie-output", action="store_true", help="tie target embedding and output projection")
    parser.add_argument("--tie-source", action="store_true", help="tie source and target embeddings")


def _config(args: argparse.Namespace):
    from adlnmt.adl.parser import parse_assignments
    from adlnmt.model import ModelConfig

    variables = {}
    for item in args.var:
        parse_assignments([item])  # validates NAME=VALUE with a located error
        name, _, value = item.partition("=")
        variables[name.strip().lstrip("$")] = value.strip()
    return ModelConfig(
        encoder=args.encoder,
        decoder=args.decoder,
        src_vocab_size=args.src_vocab,
        tgt_vocab_size=args.tgt_vocab,
        d_model=args.d_model,
        heads=args.heads,
        dropout=args.dropout,
        ff_factor=args.ff_factor,
        max_len=args.max_len,
        variables=variables,
        tie_output=args.tie_output,
        tie_source=args.tie_source,
        input_feeding=args.input_feeding,
    )


def cmd_describe(args: argparse.Namespace) -> int:
    import torch

    from adlnmt.describe import describe
    from adlnmt.model import Seq2Seq

    with torch.device("meta"):  # shapes and counts only: nothing is allocated
        model = Seq2Seq(_config(args))
    print(describe(model))
    return 0


def cmd_layers(args: argparse.Namespace) -> int:
    import adlnmt.layers  # noqa: F401
    from adlnmt.adl.registry import ALIASES, REGISTRY, Side

    for name, spec in sorted(REGISTRY.items()):
        aliases = [a for a, target in ALIASES.items() if target == name]
        sides = "/".join(side.value for side in Side if side in spec.sides)
        alias_text = f"  (alias: {', '.join(aliases)})" if aliases else ""
        print(f"{spec.signature()}  [{sides}]{alias_text}\n    {spec.summary}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="adlnmt", description="NMT architectures as ADL sentences.")
    commands = parser.add_subparsers(dest="command", required=True)
    describe = commands.add_parser("describe", help="canonical ADL, layer tree, widths and parameter counts")
    _model_arguments(describe)
    describe.set_defaults(func=cmd_describe)
    layers = commands.add_parser("layers", help="list every ADL layer with its arguments")
    layers.set_defaults(func=cmd_layers)
    from adlnmt.data.commands import add_commands as add_data_commands
    from adlnmt.train.commands import add_commands as add_train_commands

    add_data_commands(commands)
    add_train_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ADLError as err:
        print(err.render().rstrip(), file=sys.stderr)
        return 2
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `adlnmt layers | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
