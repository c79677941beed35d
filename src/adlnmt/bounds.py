"""Ranges of numeric options, declared once beside each option (the fields of :mod:`adlnmt.flags`: training, search,
server and prepare options; other commands' flags) and checked the same way by every command: a value outside its
range, or a float that is not finite (nan, inf), is a clear error naming the option, never a traceback or a silent
run."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

SEED_HIGH = 2**32 - 1  # the largest seed: numpy's legacy seeding and most tools take 32 bits


@dataclass(frozen=True)
class Bounds:
    """``low <= value <= high`` (``<``, ``>`` where open); None: no bound on that side."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def describe(self) -> str:
        """``>= 1``, ``> 0``, ``in [0, 1)``..."""
        low, high = _number(self.low), _number(self.high)
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {low}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {high}"
        return "a finite number"

    def refusal(self, value: float, shown: object = None) -> str:
        """Why ``value`` (written as ``shown``, by default as itself) is refused: "must be >= 0, got -1"; a value
        that is not finite says so ("must be a finite number >= 0, got inf")."""
        finite = "" if not isinstance(value, float) or math.isfinite(value) else "a finite number "
        rule = self.describe() if not finite or self != FINITE else ""
        return f"must be {finite}{rule}".rstrip() + f", got {value if shown is None else shown}"

    def holds(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below


def _number(value: float | None) -> str:
    return str(value) if isinstance(value, int | None) else f"{value:g}"


def at_least(low: float) -> Bounds:
    return Bounds(low=low)


POSITIVE = Bounds(low=0, low_open=True)
FRACTION = Bounds(low=0, high=1, high_open=True)  # [0, 1): rates, smoothing, Adam betas
SEED = Bounds(low=0, high=SEED_HIGH)
FINITE = Bounds()


def flag_type(kind: type[int] | type[float], bounds: Bounds) -> Callable[[str], int | float]:
    """An argparse ``type=``: the flag's text as ``kind``, within ``bounds`` (argparse then names the flag)."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None  # fmt: skip
        if not bounds.holds(value):
            raise argparse.ArgumentTypeError(bounds.refusal(value, text))
        return value

    parse.__name__ = kind.__name__  # argparse's messages name the type
    return parse
