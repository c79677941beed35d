"""experiments/analysis/seeds_needed.py: the seeds a row that would decide a claim whose effect and variances stay."""

from __future__ import annotations

import numpy as np
import pytest

from adlnmt.experiment.grid import Claim
from adlnmt.verdicts.statistics import RunScores

from .scripts import analysis_script

REPLICATES = 100_000  # the t quantile's simulation error well below the known answers' 3 % margin
SEEDS = (-1.0, 0.0, 1.0)  # seed deviations of variance 1 (ddof 1)


@pytest.fixture(scope="module")
def seeds_needed():
    yield from analysis_script("seeds_needed")


def claim(kind: str, margin: float = 0.0) -> Claim:
    return Claim("q", "", kind, "A", "B", margin, "bleu", "test")


def rows(effect: float, sentence_sd: float = 0.0) -> dict[str, list[RunScores]]:
    """A = effect + SEEDS, B = SEEDS; A's runs' sentence replicates spread by ``sentence_sd`` around their scores,
    B's none."""
    noise = np.random.default_rng(1).standard_normal(REPLICATES) * sentence_sd
    return {
        "A": [RunScores(effect + s, effect + s + noise) for s in SEEDS],
        "B": [RunScores(s, np.full(REPLICATES, s)) for s in SEEDS],
    }


def test_a_known_number_of_seeds_with_no_sentence_noise(seeds_needed) -> None:
    # seed variance 1 in each row: the effect's is 2/n with Welch's 2(n − 1) degrees of freedom, and the 95 %
    # interval clears 0 once t(0.975, 2(n − 1)) · sqrt(2/n) < 1.2: at n = 7 (2.179 · 0.535 = 1.165), not at 6
    # (2.228 · 0.577 = 1.286)
    projection = seeds_needed.project(claim("better"), rows(1.2))
    assert projection.seeds_now == 3 and projection.sentences_decide
    assert projection.seeds_needed == 7
    assert projection.seed_sd == pytest.approx(np.sqrt(2 / 3))
    assert seeds_needed.project(claim("better"), rows(-1.2)).seeds_needed == 7  # deciding against counts alike


def test_equivalence_and_non_inferiority_are_measured_from_their_margin(seeds_needed) -> None:
    # |effect| 0.3 within ±1.5: distance 1.2 to the margin, at the 90 % level (t(0.95, 2(n − 1))):
    # n = 5: 1.860 · 0.632 = 1.176 < 1.2; n = 4: 1.943 · 0.707 = 1.374
    assert seeds_needed.project(claim("equivalent", 1.5), rows(0.3)).seeds_needed == 5
    assert seeds_needed.project(claim("close", 0.9), rows(0.3)).seeds_needed == 5  # 0.3 + 0.9 above −0.9


def test_sentence_noise_alone_can_leave_a_claim_open(seeds_needed) -> None:
    projection = seeds_needed.project(claim("better"), rows(0.5, sentence_sd=1.0))  # 95 %: ±1.96 around 0.5
    assert not projection.sentences_decide and projection.seeds_needed is None
    assert seeds_needed.seeds_cell(projection) == "none: the sentences alone leave it open"
    assert projection.sentence_sd == pytest.approx(1.0, rel=0.01)
