"""The rules of :mod:`adlnmt.verdicts.claims`: how a claim reads as a comparison of its rows, its registration, its
keys in claims.json."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adlnmt.verdicts.claims import Claim, registration_of, relation


def claim(kind: str, margin: float = 0.0, ratio: float = 1.0, metric: str = "bleu") -> Claim:
    return Claim("q", "", kind, "A", "B", margin, metric, "test", ratio)


def test_relations() -> None:
    assert relation(claim("better")) == "A > B"
    assert relation(claim("better", metric="valid_ppl")) == "A < B (valid_ppl, lower is better)"
    assert relation(claim("close")) == "A ≥ B" and relation(claim("close", 0.5)) == "A ≥ B − 0.5"
    assert relation(claim("equivalent", 0.5)) == "A = B ± 0.5"
    assert relation(claim("faster", ratio=3.7)) == "A ≥ 3.7 × B"
    timed = replace(claim("faster", ratio=2.0), engine="ctranslate2", beam=5)
    assert relation(timed) == "A ≥ 2 × B (whole command, ctranslate2, beam 5)"


def test_a_lower_is_better_claim_reads_as_the_inequality_it_tests() -> None:
    """On TER or validation perplexity the effect is B − A: *close* tests A ≤ B + m, *larger gain* a larger drop."""
    assert relation(claim("close", 0.5, metric="ter")) == "A ≤ B + 0.5 (ter, lower is better)"
    assert relation(claim("close", metric="valid_ppl")) == "A ≤ B (valid_ppl, lower is better)"
    gain = replace(claim("larger_gain", metric="ter"), first_from="A0", second_from="B0")
    assert relation(gain) == "(A − A0) < (B − B0) (ter, lower is better)"
    assert relation(claim("equivalent", 0.5, metric="ter")) == "A = B ± 0.5"


def test_a_registration_is_a_commit_and_its_date() -> None:
    assert registration_of("abc1234 2026-11-20T08:00:00+00:00") == ("abc1234", "2026-11-20T08:00:00+00:00")
    assert registration_of("") == ("", "")
    for bad in ("abc1234", "abc1234 2026-11-20", "ABC1234 2026-11-20T08:00:00+00:00"):
        with pytest.raises(ValueError, match="expected 'COMMIT DATE'"):
            registration_of(bad)


def test_claims_json_keeps_the_keys_of_claims_without_a_timing() -> None:
    """Archives written before whole-command speed claims existed rebuild to the same text."""
    assert "engine" not in claim("better").fields() and "beam" not in claim("faster").fields()
    timed = replace(claim("faster"), engine="torch", beam=1).fields()
    assert (timed["engine"], timed["beam"]) == ("torch", 1)
