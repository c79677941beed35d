"""The rules that turn a measured difference and its significance into a verdict (claims.md)."""

from __future__ import annotations

import pytest

from adlnmt.experiment.claims import FAILS, HOLDS, MISSING, OPEN, speed_verdict, verdict
from adlnmt.experiment.grid import Claim


def claim(kind: str, tolerance: float = 0.0, ratio: float = 1.0) -> Claim:
    return Claim("q", "", kind, "A", "B", tolerance, "bleu", "test", ratio)


@pytest.mark.parametrize(
    ("kind", "difference", "significant", "expected"),
    [
        ("better", 1.0, {"a"}, HOLDS),
        ("better", 1.0, set(), OPEN),  # higher, but not significant for every seed
        ("better", -1.0, {"b"}, FAILS),
        ("better", -1.0, set(), OPEN),
        ("better", None, set(), MISSING),
        ("close", -0.4, {"b"}, HOLDS),  # within the tolerance, even if significant
        ("close", 2.0, {"a"}, HOLDS),
        ("close", -0.6, {"b"}, FAILS),
        ("close", -0.6, set(), OPEN),
    ],
)
def test_verdicts(kind: str, difference: float | None, significant: set[str], expected: str) -> None:
    assert verdict(claim(kind, 0.5), difference, significant) == expected


@pytest.mark.parametrize(
    ("ratios", "expected"),
    [
        ({1: 4.2, 2: 4.0}, HOLDS),  # every seed pair reaches the ratio
        ({1: 4.2, 2: 3.9}, OPEN),
        ({1: 1.3, 2: 1.2}, FAILS),
        ({}, MISSING),
    ],
)
def test_speed_verdicts(ratios: dict[int, float], expected: str) -> None:
    assert speed_verdict(claim("faster", ratio=4.0), ratios) == expected
