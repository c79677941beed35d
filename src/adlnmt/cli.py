"""The ``adlnmt`` command line. Every user error exits with status 2 and one clear message."""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
from collections.abc import Iterator, Sequence

from adlnmt.exits import exit_status

MODEL_FLAGS = ("encoder", "decoder", "preset", "d_model", "heads", "d_ff", "dropout", "max_positions", "var",
               "input_feeding", "tie_output", "tie_source", "learned_positions")  # fmt: skip


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model-defining subset of the training flags (TrainConfig's, unset: a preset's values stand unless given),
    and the vocabulary sizes a model directory would take from its data."""
    from adlnmt.flags import add_flags
    from adlnmt.train.config import TrainConfig

    add_flags(parser, TrainConfig, MODEL_FLAGS, bounded=False, unset=True)  # ranges: checked with the model
    parser.add_argument("--src-vocab", type=int, default=8000, help="source vocabulary size (default 8000)")
    parser.add_argument("--tgt-vocab", type=int, default=8000, help="target vocabulary size (default 8000)")


def _model(args: argparse.Namespace, device: str = "meta"):
    """The model the flags describe, built on ``device`` (meta: shapes and counts only, nothing allocated)."""
    import torch

    from adlnmt.adl.parser import parse_assignments
    from adlnmt.model import Seq2Seq
    from adlnmt.train.config import build_config

    values = {name: getattr(args, name) for name in MODEL_FLAGS if getattr(args, name, None) is not None}
    parse_assignments(values.get("var", []))  # located errors for malformed NAME=VALUE
    config = build_config(values)
    with torch.device(device):
        return Seq2Seq(config.model_config(args.src_vocab, args.tgt_vocab))


def cmd_describe(args: argparse.Namespace) -> int:
    from adlnmt.describe import describe

    model = _model(args)
    if args.diagram:
        from adlnmt.diagram import write_diagram

        write_diagram(model, args.diagram)
        print(f"diagram written to {args.diagram}", file=sys.stderr)
    print(describe(model))
    return 0


def cmd_architectures(args: argparse.Namespace) -> int:
    from adlnmt.presets import PRESETS

    print(f"{'preset':<24} {'family':<11} {'parameters':>12}  source — description")
    for name, preset in PRESETS.items():
        count = _model(argparse.Namespace(preset=name, src_vocab=8000, tgt_vocab=8000)).parameter_count()
        aliases = f" (also: {', '.join(preset.aliases)})" if preset.aliases else ""
        needs = f" [data: {preset.data}]" if preset.data else ""
        print(f"{name:<24} {preset.family:<11} {count:>12,}  {preset.source} — {preset.description}{aliases}{needs}")
    print("\nParameters at each preset's default size with 8,000-word vocabularies; "
          "`adlnmt describe --preset NAME` shows the full tree.")  # fmt: skip
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


def add_model_commands(commands: argparse._SubParsersAction) -> None:
    """``describe``, ``layers`` and ``architectures``: the model a set of flags describes, without data."""
    describe = commands.add_parser("describe", help="canonical ADL, layer tree, widths and parameter counts")
    _model_arguments(describe)
    describe.add_argument(
        "--diagram",
        metavar="PATH",
        help="also draw the architecture to PATH.svg, .png, .pdf, or .html (a page embedding the SVG)",
    )
    describe.set_defaults(func=cmd_describe)
    layers = commands.add_parser("layers", help="list every ADL layer with its arguments")
    layers.set_defaults(func=cmd_layers)
    architectures = commands.add_parser("architectures", help="list the presets: paper row, size, description")
    architectures.set_defaults(func=cmd_architectures)


# Every group of commands: the module that adds them to the parser, its function, and the commands it adds, in the
# order of `adlnmt --help`. A command line naming a command builds (and imports) its group alone: `adlnmt translate`
# then imports the modules of translation only. tests/test_cli.py checks the names against what each group adds.
COMMAND_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("adlnmt.cli", "add_model_commands", ("describe", "layers", "architectures")),
    ("adlnmt.data.commands", "add_commands", ("prepare", "demo-corpus")),
    ("adlnmt.train.commands", "add_commands", ("train",)),
    ("adlnmt.inference.commands", "add_commands", ("translate",)),
    ("adlnmt.distill.commands", "add_commands", ("distill",)),
    ("adlnmt.inference.shortlist_build", "add_commands", ("shortlist",)),
    ("adlnmt.train.plot", "add_plot_command", ("plot",)),
    ("adlnmt.average", "add_average_command", ("average",)),
    ("adlnmt.analysis.commands", "add_commands", ("score", "score-pairs", "contrastive", "contrastive-suite")),
    ("adlnmt.bench.commands", "add_commands", ("bench",)),
    ("adlnmt.experiment.commands", "add_commands", ("experiment", "verdicts")),
    ("adlnmt.export.commands", "add_commands", ("export",)),
    ("adlnmt.interop.commands", "add_commands", ("import",)),
    ("adlnmt.publish", "add_publish_command", ("publish",)),
    ("adlnmt.serve.commands", "add_commands", ("serve",)),
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or only of the group that adds ``command`` when it names one."""
    parser = argparse.ArgumentParser(prog="adlnmt", description="NMT architectures as ADL sentences.")
    commands = parser.add_subparsers(dest="command", required=True)
    named = any(command in names for _, _, names in COMMAND_GROUPS)
    for module, adder, names in COMMAND_GROUPS:
        if not named or command in names:
            getattr(importlib.import_module(module), adder)(commands)
    return parser


# What argparse reads as a negative number, not a flag, when a parser has no option that looks like one.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _owned_tokens(parser: argparse.ArgumentParser, argv: list[str]) -> Iterator[tuple[argparse.ArgumentParser, str]]:
    """Each argument before ``--`` with the parser of the (sub)command it follows: ``adlnmt bench decode --x``."""
    owner = parser
    for token in argv:
        if token == "--":
            return
        commands = next((a for a in owner._actions if isinstance(a, argparse._SubParsersAction)), None)
        if commands and token in commands.choices:
            owner = commands.choices[token]
        else:
            yield owner, token


def _flag_actions(parser: argparse.ArgumentParser, token: str) -> list[argparse.Action] | None:
    """The options of ``parser`` that ``token`` may name (as argparse matches them: exact, ``--flag=value``, a
    unique prefix, ``-n5``); None when argparse reads ``token`` as a value, not a flag."""
    if not token.startswith(tuple(parser.prefix_chars)) or len(token) == 1 or " " in token:
        return None
    if _NEGATIVE_NUMBER.match(token) and not parser._has_negative_number_optionals:
        return None
    name = token.split("=", 1)[0]
    options = parser._option_string_actions
    return [a for option, a in options.items() if option.startswith(name) or (len(name) > 2 and option == name[:2])]


def _refuse_unknown_flags(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Refuse the unknown flags of ``argv`` before anything else, by the (sub)command they follow, with the closest
    flag of that command: argparse reported a missing required flag first (``adlnmt translate --modle x`` said
    ``the following arguments are required: --model``). A help flag anywhere leaves the line to argparse."""
    unknown: list[tuple[argparse.ArgumentParser, str]] = []
    for owner, token in _owned_tokens(parser, argv):
        actions = _flag_actions(owner, token)
        if actions and all(isinstance(action, argparse._HelpAction) for action in actions):
            return
        if actions == []:
            unknown.append((owner, token))
    if not unknown:
        return
    owner = unknown[0][0]
    flags = {option.lstrip(owner.prefix_chars): option for option in owner._option_string_actions}
    named = []
    for token in (token for flag_owner, token in unknown if flag_owner is owner):
        close = difflib.get_close_matches(token.split("=", 1)[0].lstrip(owner.prefix_chars), list(flags), n=1)
        named.append(f"{token} (did you mean {flags[close[0]]}?)" if close else token)
    owner.error(f"unrecognized arguments: {' '.join(named)}")


def _parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed; an unknown flag is refused first, an unknown argument after the command by that command's
    parser, with its usage (argparse leaves unknown arguments to the top parser, whose usage, with one group built,
    listed its commands alone: ``adlnmt layers --bogus`` showed ``adlnmt [-h] {describe,layers,architectures}``)."""
    parser = build_parser(argv[0] if argv else None)
    _refuse_unknown_flags(parser, argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        owner = parser
        if argv[0] == args.command:  # down to the (sub)command given: `adlnmt bench decode`
            while (
                commands := next((a for a in owner._actions if isinstance(a, argparse._SubParsersAction)), None)
            ) and getattr(args, commands.dest, None) in commands.choices:
                owner = commands.choices[getattr(args, commands.dest)]
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse(argv)
    return exit_status(lambda: args.func(args), args.command)


if __name__ == "__main__":
    sys.exit(main())
