"""The rules of :mod:`adlnmt.verdicts.claims`: how a claim reads as a comparison of its rows."""

from __future__ import annotations

from adlnmt.verdicts.claims import Claim, relation


def claim(kind: str, margin: float = 0.0, ratio: float = 1.0, metric: str = "bleu") -> Claim:
    return Claim("q", "", kind, "A", "B", margin, metric, "test", ratio)


def test_relations() -> None:
    assert relation(claim("better")) == "A > B"
    assert relation(claim("better", metric="valid_ppl")) == "A < B (valid_ppl, lower is better)"
    assert relation(claim("close")) == "A ≥ B" and relation(claim("close", 0.5)) == "A ≥ B − 0.5"
    assert relation(claim("equivalent", 0.5)) == "A = B ± 0.5"
    assert relation(claim("faster", ratio=3.7)) == "A ≥ 3.7 × B"
