"""Options that declare their own flags (adlnmt.flags): every field of SearchOptions, ServeOptions and
PrepareOptions has exactly one flag in its command, and flags → options gives back the options the flags spell."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, fields
from typing import Any

import pytest

from adlnmt.bench.commands import SEARCH_FLAGS
from adlnmt.bounds import at_least
from adlnmt.cli import build_parser
from adlnmt.data.options import PrepareOptions
from adlnmt.errors import UserError
from adlnmt.flags import add_flags, flag_of, flagged, from_flags, option, out_of_bounds
from adlnmt.inference.options import SearchOptions
from adlnmt.serve.limits import ServeOptions

SEARCH = SearchOptions(beam=7, nbest=3, batch_size=9, length_penalty=0.5, max_len_ratio=1.5, max_len_extra=4,
                       incremental=False, alignments=True, workers=2, cuda_graphs=True, sampling="topk:5",
                       temperature=0.7, seed=11, shortlist="lex.safetensors")  # fmt: skip
SERVE = ServeOptions(model="m", host="0.0.0.0", allowed_hosts=("a.example", "b"), port=9000, checkpoint="last",
                     precision="bf16", engine="auto", device="cuda", threads=3, max_batch_sentences=8, max_wait_ms=2.5,
                     max_body_bytes=4096, max_sentences=7, max_chars=99, max_beam=4, max_request_cost=1234,
                     read_timeout_s=3.5, request_timeout_s=7.5, max_queue_sentences=70)  # fmt: skip
COMMANDS = {"translate": (SearchOptions, ["--model", "m"]), "serve": (ServeOptions, []),
            "prepare": (PrepareOptions, ["--train-src", "a", "--train-tgt", "b", "--valid-src", "c", "--valid-tgt",
                                         "d", "--out", "e"])}  # fmt: skip


def command(*path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return parser


def flags_of(options: Any) -> list[str]:
    """The command-line flags that spell ``options`` (switches given where they differ from the default)."""
    argv: list[str] = []
    for f in flagged(type(options)):
        value = getattr(options, f.name)
        if f.metadata["switch"]:
            argv += [flag_of(f)] if value != f.default else []
        else:
            argv += [flag_of(f), ",".join(value) if isinstance(value, tuple) else str(value)]
    return argv


@pytest.mark.parametrize(
    ("path", "options", "names"),
    [
        (("translate",), SearchOptions, None),
        (("serve",), ServeOptions, None),
        (("prepare",), PrepareOptions, None),
        (("bench", "decode"), SearchOptions, SEARCH_FLAGS),
    ],
)
def test_every_field_has_exactly_one_flag(path: tuple[str, ...], options: type, names: tuple[str, ...] | None) -> None:
    actions = command(*path)._actions
    declared = [f for f in flagged(options) if names is None or f.name in names]
    for f in declared:
        matching = [a for a in actions if a.dest == f.name]
        assert len(matching) == 1, f.name
        assert matching[0].option_strings == [flag_of(f)]
    if options is not PrepareOptions:  # PrepareOptions.joint has the hand-made pair --joint/--separate
        assert {f.name for f in declared} == ({f.name for f in fields(options)} if names is None else set(names))


@pytest.mark.parametrize("options", [SEARCH, SERVE, PrepareOptions(1000, True, "unigram", 80, 1.5, True)])
def test_flags_round_trip_to_the_options(options: Any) -> None:
    kind = type(options)
    name, required = next((name, required) for name, (of, required) in COMMANDS.items() if of is kind)
    assert all(getattr(options, f.name) != f.default for f in flagged(kind))  # a flag left out would show
    args = build_parser().parse_args([name, *required, *flags_of(options)])
    assert from_flags(kind, args, [f.name for f in flagged(kind)]) == options


@pytest.mark.parametrize(("name", "options"), [("translate", SearchOptions()), ("serve", ServeOptions(model="m"))])
def test_no_flags_give_the_defaults(name: str, options: Any) -> None:
    assert from_flags(type(options), build_parser().parse_args([name, "--model", "m"])) == options


def test_translate_search_options_come_from_the_flags() -> None:
    args = build_parser().parse_args(["translate", "--model", "m", *flags_of(SEARCH)])
    assert from_flags(SearchOptions, args) == SEARCH
    bench = build_parser().parse_args(["bench", "decode", "--batch-size", "3", "--workers", "2",
                                       "--length-penalty", "0.25", "--seed", "9"])  # fmt: skip
    assert from_flags(SearchOptions, bench, SEARCH_FLAGS) == SearchOptions(batch_size=3, workers=2, length_penalty=0.25)


@dataclass(frozen=True)
class Toy:
    count: int = option(2, "a count (default %(default)s)", bounds=at_least(1))
    rate: float = option(0.5, "a rate")  # no bounds declared: finite
    plain: int = 0  # no flag


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--count", "0"], "argument --count: must be >= 1, got 0"), (["--rate", "nan"], "must be a finite number")],
)
def test_bounded_flags_are_checked_by_argparse(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_flags(parser, Toy)
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    assert message in capsys.readouterr().err


def test_unbounded_flags_leave_the_ranges_to_the_options() -> None:
    parser = argparse.ArgumentParser()
    add_flags(parser, Toy, bounded=False)
    toy = from_flags(Toy, parser.parse_args(["--count", "0", "--rate", "inf"]))
    assert out_of_bounds(toy) == ["--count must be >= 1, got 0", "--rate must be a finite number, got inf"]
    assert "--plain" not in parser.format_help() and "a count (default 2)" in parser.format_help()


def test_serve_options_name_every_problem_by_its_flag() -> None:
    with pytest.raises(
        UserError, match=re.escape("--port must be in [0, 65535], got -1; --read-timeout must be > 0, got 0")
    ):
        ServeOptions(model="m", port=-1, read_timeout_s=0)


def test_search_options_hold_the_ranges_of_their_flags() -> None:
    """SearchOptions made in Python (``Translator.search``) are refused where their flags would be: a negative
    length penalty gave empty translations, a batch size of 0 failed inside the search."""
    with pytest.raises(
        UserError, match=re.escape("--batch-size must be >= 1, got 0; --length-penalty must be >= 0, got -1")
    ):
        SearchOptions(batch_size=0, length_penalty=-1)


@pytest.mark.parametrize(
    "argv",
    [
        ["score-pairs", "--source", "s", "--target", "t"],
        ["contrastive", "--suite", "s"],
        ["serve"],
        ["export", "--format", "onnx", "--out", "o"],
        ["average", "--last", "2"],
    ],
)
def test_a_command_of_one_model_refuses_a_second_model(argv: list[str], capsys) -> None:
    """``--model A --model B`` is an ensemble for ``adlnmt translate``; the commands that run one model refuse it
    with both names (argparse would have kept B in silence), before anything loads."""
    with pytest.raises(SystemExit) as stopped:
        build_parser(argv[0]).parse_args([*argv, "--model", "m1", "--model", "m2"])
    assert stopped.value.code == 2
    assert (
        "error: argument --model: given twice ('m1', then 'm2'); this command runs one model (an ensemble of "
        "several: adlnmt translate --model A --model B)" in capsys.readouterr().err
    )
    assert build_parser(argv[0]).parse_args([*argv, "--model", "m1"]).model == "m1"
