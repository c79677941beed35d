"""The rules of :mod:`adlnmt.verdicts.claims`: how a claim reads as a comparison of its rows, its registration, its
keys in claims.json."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adlnmt.verdicts.claims import Claim, Judgement, adjusted, effect, p_values, record, registration_of, relation
from adlnmt.verdicts.page import _cells
from adlnmt.verdicts.statistics import FAILS, HOLDS, NO_SPREAD, assess, seed_level


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


def test_a_one_sided_claim_that_does_not_hold_states_the_p_it_rests_on() -> None:
    """*close* A ≥ B − 0.5 with A 3 points below: its own p is ~1 (against); the *does not hold* rests on the test
    against the claim, Bonferroni over the family, which claims.md and claims.json state beside it."""
    close, other = claim("close", 0.5), replace(claim("better"), quote="other")
    tested = assess("close", seed_level([30.0, 30.5, 29.8], [33.0, 33.4, 32.9], resamples=20_000), 0.5)
    beside = assess("better", seed_level([30.0, 30.5], [30.1, 30.2], resamples=20_000))
    judged = adjusted([Judgement(c, "test", True, ((1, 2, 3), (1, 2, 3)), (30.1, 33.1), t, fewest_seeds=3)
                       for c, t in ((close, tested), (other, beside))])  # fmt: skip
    reverse = min(1.0, 2 * tested.p_reverse)
    assert judged[0].verdict == FAILS and tested.p_value > 0.99 and reverse < 0.05
    assert f"against the claim {reverse:.4f}, Bonferroni × 2" in p_values(judged[0])
    assert record(judged[0])["p_against_claim_bonferroni"] == reverse
    line = {**close.fields(), "tested_as": relation(close), **record(judged[0]), "other_tests": []}
    assert f"against the claim {reverse:.4f} (Bonferroni)" in _cells(line, "t", "t.md")  # the verdict page
    assert "against the claim" not in p_values(judged[1]) and "p_against_claim_bonferroni" not in record(judged[1])


def test_seeds_that_gave_one_value_decide_nothing() -> None:
    """Two seeds a row, each row's identical: the seed level has no variance to draw, so its zero-width interval
    would make *better* hold; it is a point estimate that reads *inconclusive* and takes no place in Holm."""
    still = seed_level([10.0, 10.0], [12.0, 12.0], lower_is_better=True)
    assert not still.drawn and still.effect == 2.0
    assert seed_level([10.0, 10.1], [12.0, 12.0]).drawn  # one row that varies is enough to draw from
    judged = adjusted([Judgement(claim("better", metric="valid_ppl"), "test", True, ((1, 2), (1, 2)), (10.0, 12.0),
                                 assess("better", still), fewest_seeds=2)])  # fmt: skip
    assert judged[0].verdict == judged[0].measured == NO_SPREAD != HOLDS and judged[0].adjusted_p is None
    assert effect(judged[0]) == "+2.00 (no interval: every seed gave the same value)"
