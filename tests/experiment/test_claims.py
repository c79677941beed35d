"""The rules that turn a measured difference and its significance into a verdict (claims.md)."""

from __future__ import annotations

import pytest

from adlnmt.experiment.claims import FAILS, HOLDS, MISSING, OPEN, verdict
from adlnmt.experiment.grid import Claim


def claim(kind: str, tolerance: float = 0.0) -> Claim:
    return Claim("q", "", kind, "A", "B", tolerance, "bleu", "test")


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
