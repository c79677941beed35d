"""Every ``adlnmt`` command line of the documentation parses with the current command line (nothing is run), so a
renamed flag, a removed choice or a newly required flag shows up as ``file:line`` of the stale command.

Commands are read from the fenced and indented code blocks of README.md, docs/*.md and experiments/README.md
(benchmarks/NOTES.md is a dated log and stays as written): backslash continuations joined, ``# …`` comments dropped,
a line cut into commands at ``&&``, ``||``, ``;``, ``&`` and pipes, each cut at its first redirection; a command
starts at ``adlnmt``, also after ``$ ``, ``nice [-n N]``, ``srun`` or ``-m`` (``python -m``, ``torchrun … -m``).
Synopses count too: ``[…]`` groups are given, and each alternative of ``a|b`` and ``(A | B)`` once (variant ``k``
takes the ``k``-th of every alternation). An upper-case placeholder (``N``, ``MODEL``, ``TABLE.md``), ``<dir>`` or
``...`` passes as a value the flag's type or choices would refuse; ``...`` anywhere but after a flag stands for
arguments left out and is dropped. Flags must be spelled in full (argparse would take an abbreviation)."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from adlnmt import cli

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")), "experiments/README.md"]
# Commands shown failing on purpose, by file and Command.text, each with its reason (none does so far: the docs
# describe their errors in prose).
ALLOWED_FAILURES: dict[tuple[str, str], str] = {}
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
REDIRECTION = re.compile(r"\d*(?:>>?|<|&>)(?:&\d+|&-)?")
PLACEHOLDER = re.compile(r"(?:[a-z]+:)?[A-Z][A-Z0-9_]*(?:[.@][\w.@]*)?|<[^<>\s]+>|\.\.\.|…|.*,\.\.\.")
ELLIPSIS = {("...",), ("…",)}
SEPARATORS = {"&&", "||", ";", "&", "|"}
Token = str | tuple[str, ...]  # an operator, or a word: its alternatives (``onnx|ctranslate2``: two)


@dataclass(frozen=True)
class Command:
    """An ``adlnmt`` command of a document: where it starts and its words after ``adlnmt`` (a synopsis' groups and
    alternatives kept), as text and as the argument lists it stands for."""

    where: str
    text: str
    variants: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Group:
    """``[…]`` (optional: given) or ``(…)``, with its alternatives (``[--joint | --separate]``: two)."""

    alternatives: tuple[tuple[Token | Group, ...], ...]


def code_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) of the lines of the fenced and indented code blocks: backslash
    continuations joined, and a synopsis' next line opening with ``[`` or ``(`` (docs/experiments.md)."""
    lines: list[tuple[int, str]] = []
    fence, previous_blank, pending, start, last = "", True, "", 0, 0
    for number, line in enumerate(text.splitlines(), 1):
        opening = FENCE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = ""
                continue
        elif opening:
            fence = opening.group(1)
            continue
        indented = not fence and previous_blank and line.startswith(("    ", "\t"))
        previous_blank = (not fence and not line.strip()) or indented
        if not (fence or indented):
            continue
        stripped = line.strip().removeprefix("$ ")
        if not pending:
            start = number
        if stripped.endswith("\\") and not stripped.startswith("#"):
            pending += stripped[:-1] + " "
        elif stripped.startswith(("[", "(")) and not pending and lines and last == number - 1:
            lines[-1] = (lines[-1][0], f"{lines[-1][1]} {stripped}")
        else:
            lines.append((start, pending + stripped))
            pending = ""
        last = number
    return lines


def lex(line: str) -> list[Token]:
    """``line``'s words and operators (``[ ] ( ) | && || ; & >``); quotes as shlex reads them; ``#`` starting a word
    ends the line."""
    tokens: list[Token] = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c.isspace():
            i += 1
        elif c == "#":
            break
        elif line.startswith(("&&", "||"), i):
            tokens.append(line[i : i + 2])
            i += 2
        elif c in "[]()|;":
            tokens.append(c)
            i += 1
        elif (redirection := REDIRECTION.match(line, i)) and not re.match(r"<[^<>\s]+>", line[i:]):
            tokens.append(">")
            i = redirection.end()
        elif c == "&":
            tokens.append(c)
            i += 1
        else:
            i = _word(line, i, tokens)
    return tokens


def _word(line: str, i: int, tokens: list[Token]) -> int:
    """Reads the word at ``i`` into ``tokens``; returns where it ends. A ``|`` inside it separates alternatives; a
    bracket it does not open (``GRID[@SCALE]`` opens one) ends it."""
    parts, depth = [""], 0
    while i < len(line) and not line[i].isspace():
        c = line[i]
        if c in "'\"":
            end = line.find(c, i + 1)
            end = len(line) - 1 if end < 0 else end
            parts[-1] += line[i : end + 1]
            i = end + 1
            continue
        if c == "\\":
            parts[-1] += line[i : i + 2]
            i += 2
            continue
        if c == "<" and (placeholder := re.match(r"<[^<>\s]+>", line[i:])):
            parts[-1] += placeholder.group()
            i += placeholder.end()
            continue
        if c in ";&<>" or line.startswith("||", i) or (c in ")]" and not depth):
            break
        if c == "|":
            parts.append("")
        else:
            depth += (c in "([") - (c in ")]")
            parts[-1] += c
        i += 1
    tokens.append(tuple("".join(shlex.split(part)) if part else "" for part in parts))
    return i


def _tree(tokens: list[Token], where: str) -> tuple[tuple[Token | Group, ...], ...]:
    """The alternatives of a sequence of tokens (split at its top-level ``|``), groups nested."""
    stack: list[list[list[Token | Group]]] = [[[]]]
    closers: list[str] = []
    for token in tokens:
        if token in ("[", "("):
            stack.append([[]])
            closers.append("]" if token == "[" else ")")
        elif token in ("]", ")"):
            if not closers or closers.pop() != token:
                raise ValueError(f"{where}: unbalanced {token!r}")
            alternatives = stack.pop()
            stack[-1][-1].append(Group(tuple(tuple(a) for a in alternatives)))
        elif token == "|":
            stack[-1].append([])
        else:
            stack[-1][-1].append(token)
    if closers:
        raise ValueError(f"{where}: unclosed {closers[-1]!r}")
    return tuple(tuple(a) for a in stack[0])


def _alternations(nodes: tuple[Token | Group, ...]) -> int:
    counts = [1]
    for node in nodes:
        if isinstance(node, Group):
            counts += [len(node.alternatives), *(_alternations(a) for a in node.alternatives)]
        else:
            counts.append(len(node))
    return max(counts)


def _expand(nodes: tuple[Token | Group, ...], k: int) -> list[str]:
    words: list[str] = []
    for node in nodes:
        if isinstance(node, Group):
            words += _expand(node.alternatives[min(k, len(node.alternatives) - 1)], k)
        else:
            words.append(node[min(k, len(node) - 1)])
    return words


def _start(tokens: list[Token]) -> int | None:
    """Where the arguments of ``adlnmt`` start in a command's tokens, or None when it runs something else."""
    words = [t[0] if isinstance(t, tuple) and len(t) == 1 else None for t in tokens]
    i = 0
    if words[:1] == ["nice"]:
        i = 3 if words[1:2] == ["-n"] else 1
    elif words[:1] == ["srun"]:
        i = 1
    if words[i : i + 1] != ["adlnmt"] and "-m" in words[i:]:  # python -m adlnmt, torchrun … -m adlnmt
        i = words.index("-m", i) + 1
    return i + 1 if words[i : i + 1] == ["adlnmt"] else None


def commands(text: str, name: str) -> list[Command]:
    """The ``adlnmt`` commands of the Markdown ``text`` of the document ``name``."""
    found: list[Command] = []
    for number, line in code_lines(text):
        if not re.search(r"(?:^|\s)adlnmt\s", line):
            continue
        try:
            tokens, depth, pieces = lex(line), 0, [[]]
        except ValueError as error:  # an unclosed quote
            raise ValueError(f"{name}:{number}: {error}") from None
        for token in tokens:  # commands: cut at top-level separators (a `|` inside a group is an alternative)
            depth += (token in ("[", "(")) - (token in ("]", ")"))
            if token in SEPARATORS and depth == 0:
                pieces.append([])
            else:
                pieces[-1].append(token)
        for piece in pieces:
            piece = piece[: piece.index(">")] if ">" in piece else piece
            start = _start(piece)
            if start is None:
                continue
            where = f"{name}:{number}"
            arguments = piece[start:]
            arguments = [  # `...` after a flag is its value (`--precision ...`), elsewhere arguments left out
                token
                for before, token in zip([None, *arguments], arguments, strict=False)
                if token not in ELLIPSIS or (isinstance(before, tuple) and before[-1].startswith("-"))
            ]
            (nodes,) = _tree(arguments, where)  # no top-level `|`: those cut commands
            variants = tuple(tuple(_expand(nodes, k)) for k in range(_alternations(nodes)))
            shown = " ".join(t if isinstance(t, str) else "|".join(map(shlex.quote, t)) for t in piece[start - 1 :])
            shown = re.sub(r"([\[(]) | ([\])])", r"\1\2", shown)
            found.append(Command(where, shown, variants))
    return found


def document_commands() -> list[Command]:
    found = [c for name in DOCUMENTS for c in commands((ROOT / name).read_text(encoding="utf-8"), name)]
    seen: dict[str, int] = {}
    for i, command in enumerate(found):  # `a && b` on one line: the second is file:line #2
        seen[command.where] = seen.get(command.where, 0) + 1
        if seen[command.where] > 1:
            found[i] = Command(f"{command.where} #{seen[command.where]}", command.text, command.variants)
    return found


def _lenient(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def converted(value: str) -> Any:
        try:
            return convert(value)
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            if PLACEHOLDER.fullmatch(value):
                return value
            raise

    return converted


class _Choices(list):
    """A flag's choices, and any placeholder."""

    def __contains__(self, value: object) -> bool:
        return super().__contains__(value) or (isinstance(value, str) and bool(PLACEHOLDER.fullmatch(value)))


def _accept_placeholders(parser: argparse.ArgumentParser) -> None:
    """``parser`` and its subcommands' parsers take a placeholder as any value, and a flag by its full name alone
    (``--warmup`` where the flag became ``--warmup-steps`` is stale, not an abbreviation)."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                _accept_placeholders(sub)
            continue
        if action.type is not None:
            action.type = _lenient(parser._registry_get("type", action.type, action.type))
        if action.choices is not None and not isinstance(action.choices, _Choices):
            action.choices = _Choices(action.choices)


def parse_error(argv: list[str] | tuple[str, ...]) -> str | None:
    """What the command line refuses in ``argv`` (the last line of its message), or None when it parses (``--help``
    too); nothing is run."""
    build = cli.build_parser

    def lenient_parser(command: str | None = None) -> argparse.ArgumentParser:
        parser = build(command)
        _accept_placeholders(parser)
        return parser

    err = io.StringIO()
    with (
        mock.patch.object(cli, "build_parser", lenient_parser),
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        try:
            cli._parse(list(argv))
        except SystemExit as exit:
            return None if exit.code == 0 else (err.getvalue().strip().splitlines() or [f"exit {exit.code}"])[-1]
    return None


def failures(command: Command) -> list[str]:
    """Each argument list of ``command`` the command line refuses, with why."""
    return [f"adlnmt {shlex.join(v)}: {error}" for v in command.variants if (error := parse_error(v))]


DOCUMENTED = document_commands()


def test_the_documents_show_commands() -> None:
    assert len(DOCUMENTED) > 50
    assert {c.where.split(":")[0] for c in DOCUMENTED} >= {"README.md", "docs/training.md", "docs/translating.md"}


@pytest.mark.parametrize("command", DOCUMENTED, ids=lambda command: command.where)
def test_documented_command_parses(command: Command) -> None:
    allowed = ALLOWED_FAILURES.get((command.where.split(":")[0], command.text))
    if allowed:
        assert failures(command), f"allowed to fail ({allowed}) but parses: drop it from ALLOWED_FAILURES"
    else:
        assert failures(command) == [], f"{command.where}: {command.text}"


def test_a_stale_command_is_caught() -> None:
    text = "Text adlnmt translate --no-such-flag\n\n```sh\n$ adlnmt translate --no-such-flag\n```\n"
    (stale,) = commands(text, "doc.md")
    assert stale.where == "doc.md:4" and failures(stale) != []
    (unknown,) = commands("    adlnmt translate --model M --no-such-flag\n", "doc.md")
    assert failures(unknown)[0].endswith("adlnmt translate: error: unrecognized arguments: --no-such-flag")
    (missing,) = commands("    adlnmt score --hyp hyp.txt\n", "doc.md")  # --ref is required
    assert "required: --ref" in failures(missing)[0]
    (choice,) = commands("    adlnmt export --model m --format onnx|tflite --out x\n", "doc.md")  # two variants
    (refused,) = failures(choice)
    assert refused.startswith("adlnmt export --model m --format tflite") and "invalid choice: 'tflite'" in refused
    (abbreviated,) = commands("    adlnmt translate --model M --inp FILE\n", "doc.md")  # --input
    assert "unrecognized arguments: --inp FILE" in failures(abbreviated)[0]


def test_a_valid_command_passes_and_continuations_are_joined() -> None:
    text = ("Intro:\n\n    adlnmt translate --model M --input FILE \\\n        --beam 5 > out.txt  # a comment\n"
            "    adlnmt average --model m (--best N | --last N)\n"
            "        [--output FILE] | head && adlnmt layers\n")  # fmt: skip
    translate, average, layers = commands(text, "doc.md")
    assert translate.where == "doc.md:3" and translate.variants == (("translate", "--model", "M", "--input", "FILE",
                                                                     "--beam", "5"),)  # fmt: skip
    assert average.variants == (("average", "--model", "m", "--best", "N", "--output", "FILE"),
                                ("average", "--model", "m", "--last", "N", "--output", "FILE"))  # fmt: skip
    assert layers.where == "doc.md:5" and layers.variants == (("layers",),)
    assert [failures(c) for c in (translate, average, layers)] == [[], [], []]


def test_elisions_and_help_pass() -> None:
    text = ("```sh\n$ adlnmt train ... --log-interval 100 2>&1 | tee log\n"
            "nice -n 19 adlnmt bench decode --preset NAME [--precision ...]\nadlnmt train --help\n```\n")  # fmt: skip
    train, bench, helped = commands(text, "doc.md")
    assert train.variants == (("train", "--log-interval", "100"),) and bench.text.endswith("[--precision ...]")
    assert bench.variants == (("bench", "decode", "--preset", "NAME", "--precision", "..."),)
    assert [failures(c) for c in (train, bench, helped)] == [[], [], []]
