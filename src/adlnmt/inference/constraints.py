"""Lexical constraints of one input line, as given and as encoded, without PyTorch: the phrases its translations must
include (each at least once, in any order) and those they must not contain (``adlnmt translate --constraints``, the
``constraints`` field of ``POST /translate``, :meth:`~adlnmt.inference.translator.Translator.search`).

A constraints file has one JSON object per input line, ``{"include": [...], "exclude": [...]}`` (either key may be
left out; ``{}`` or an empty line: no constraints). A phrase is target text; it is encoded as a target sentence is
(the target sentencepiece model, which also normalizes it; no BOS or EOS), so it must appear in the output exactly
as those pieces. The search honours them by dynamic beam allocation (:mod:`adlnmt.inference.allocation`).

Bounds, one rule for every entry point: at most :data:`MAX_PHRASES` phrases per line, each non-empty (after
whitespace is stripped) and in include or exclude, not both; the server also counts each line's constraint pieces
into a request's cost (:func:`constraint_pieces`, beside the source pieces ``--max-request-cost`` bounds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adlnmt.data.vocab import UNK, Vocab
from adlnmt.errors import DataError, UserError
from adlnmt.jsontext import JsonError, parse_json, type_name

MAX_PHRASES = 64
"""The most phrases (include and exclude together) one line may hold."""
KINDS = ("include", "exclude")


@dataclass(frozen=True)
class Constraints:
    """The constraints of one input line: target phrases its translations must ``include`` and must ``exclude``."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problem = constraint_problem(self.include, self.exclude)
        if problem:
            raise UserError(problem)

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude)

    @classmethod
    def from_json(cls, record: Any) -> Constraints:
        """``{"include": [...], "exclude": [...]}`` (lists of strings; keys optional) → Constraints; a UserError
        saying what is wrong."""
        if not isinstance(record, Mapping):
            raise UserError(
                f"constraints must be a JSON object with 'include' and/or 'exclude', got {type_name(record)}"
            )
        unknown = sorted(set(record) - set(KINDS))
        if unknown:
            raise UserError(f"unknown constraint key(s) {', '.join(map(repr, unknown))}: use 'include' and 'exclude'")
        phrases = {kind: record.get(kind, []) for kind in KINDS}
        for kind, value in phrases.items():
            if not isinstance(value, list):
                raise UserError(f"'{kind}' must be a list of strings, not {type_name(value)}")
            wrong = next((number for number, phrase in enumerate(value, 1) if not isinstance(phrase, str)), None)
            if wrong is not None:
                raise UserError(f"'{kind}' must be a list of strings; item {wrong} is {type_name(value[wrong - 1])}")
        return cls(tuple(phrases["include"]), tuple(phrases["exclude"]))


def constraint_problem(include: Sequence[str], exclude: Sequence[str]) -> str | None:
    """What is wrong with a line's include and exclude phrases (see the module docstring), or None."""
    if len(include) + len(exclude) > MAX_PHRASES:
        return f"{len(include) + len(exclude):,} constraint phrases on one line; at most {MAX_PHRASES} are allowed"
    for kind, phrases in (("include", include), ("exclude", exclude)):
        empty = [number for number, phrase in enumerate(phrases, 1) if not phrase.strip()]
        if empty:
            return f"'{kind}' phrase {empty[0]} is empty"
    both = sorted({phrase.strip() for phrase in include} & {phrase.strip() for phrase in exclude})
    if both:
        return f"phrase {both[0]!r} is both in 'include' and in 'exclude'"
    return None


def parse_line(text: str, path: str | Path, number: int) -> Constraints:
    """One line of a constraints file (``number`` 1-based) → its Constraints; a DataError at ``path:number``."""
    if not text.strip():
        return Constraints()
    try:
        return Constraints.from_json(parse_json(text))
    except JsonError as err:
        where = "" if err.column is None else f" at column {err.column}"
        raise DataError(f"malformed JSON ({err.reason}{where})", path, number) from None
    except UserError as err:
        raise DataError(str(err), path, number) from None


def read_constraints(lines: Iterable[str], path: str | Path, expected: int) -> list[Constraints]:
    """The constraints of each of ``expected`` input lines, from the ``lines`` of the constraints file ``path``; a
    DataError when a line is wrong or when the file does not have exactly one line per input line."""
    found = [parse_line(text, path, number) for number, text in enumerate(lines, 1)]
    if len(found) != expected:
        raise DataError(f"{len(found):,} lines of constraints for {expected:,} input lines: need one per input line",
                        path)  # fmt: skip
    return found


@dataclass(frozen=True)
class EncodedConstraints:
    """A line's constraints as target token ids: ``include`` and ``exclude`` phrases (each a non-empty tuple)."""

    include: tuple[tuple[int, ...], ...] = ()
    exclude: tuple[tuple[int, ...], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude)

    @property
    def include_tokens(self) -> int:
        """How many tokens the include phrases have together (the search's length limit grows by as many)."""
        return sum(len(phrase) for phrase in self.include)

    def without_include(self) -> EncodedConstraints:
        """The exclusions alone (the search of a line whose include phrases cannot be met)."""
        return EncodedConstraints((), self.exclude)


def encode_constraints(constraints: Constraints, vocab: Vocab) -> tuple[EncodedConstraints, list[str]]:
    """``constraints`` through the target sentencepiece model → the encoded ones and the include phrases left out
    because the vocabulary cannot spell them (a piece is UNK). An exclude phrase with UNK is kept: the search never
    writes UNK-free text that matches it, and UNK itself is then avoided."""
    include, unspellable = [], []
    for phrase in constraints.include:
        ids = tuple(vocab.encode(phrase))
        if UNK in ids or not ids:
            unspellable.append(phrase)
        else:
            include.append(ids)
    exclude = tuple(ids for ids in (tuple(vocab.encode(phrase)) for phrase in constraints.exclude) if ids)
    return EncodedConstraints(tuple(include), exclude), unspellable


def constraint_pieces(constraints: EncodedConstraints | None) -> int:
    """The pieces of a line's constraints, counted into a request's cost beside its source pieces (the server's
    ``max_request_cost``: beam × (source pieces + constraint pieces))."""
    if constraints is None:
        return 0
    return sum(len(phrase) for phrase in constraints.include) + sum(len(phrase) for phrase in constraints.exclude)


def occurrences(tokens: Sequence[int], phrase: Sequence[int]) -> int:
    """How many times ``phrase`` occurs in ``tokens`` as a contiguous run (overlapping occurrences counted)."""
    size = len(phrase)
    return sum(1 for start in range(len(tokens) - size + 1) if tuple(tokens[start : start + size]) == tuple(phrase))


def unmet(tokens: Sequence[int], include: Sequence[Sequence[int]]) -> list[int]:
    """The indices of the ``include`` phrases that ``tokens`` lacks (a phrase given n times must occur n times)."""
    missing: list[int] = []
    seen: dict[tuple[int, ...], int] = {}
    for index, phrase in enumerate(include):
        key = tuple(phrase)
        seen[key] = seen.get(key, 0) + 1
        if occurrences(tokens, key) < seen[key]:
            missing.append(index)
    return missing
