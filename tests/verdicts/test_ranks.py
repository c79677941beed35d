"""Rank agreement with a paper's column: Spearman's ρ of average ranks, and its interval over seeds only where every
row has seeds to draw from."""

from __future__ import annotations

import numpy as np
import pytest

from adlnmt.verdicts.ranks import agreement, average_ranks, spearman


@pytest.mark.parametrize(
    ("ours", "paper", "rho"),
    [
        ([30.0, 31.0, 32.0], [25.0, 25.5, 26.0], 1.0),
        ([32.0, 31.0, 30.0, 29.0], [25.0, 25.5, 26.0, 26.5], -1.0),
        ([30.0, 31.0, 32.0], [25.4, 25.4, 25.7], 0.8660254),  # the paper's tie shares its mean rank
        ([1.0, 3.0, 2.0, 4.0], [1.0, 2.0, 3.0, 4.0], 0.8),
    ],
)
def test_spearman_of_average_ranks(ours: list[float], paper: list[float], rho: float) -> None:
    assert spearman(np.array([ours]), np.array(paper))[0] == pytest.approx(rho)


def test_ties_share_their_mean_rank() -> None:
    assert average_ranks(np.array([[3.0, 1.0, 3.0, 2.0]]))[0].tolist() == [3.5, 1.0, 3.5, 2.0]


def test_a_constant_side_has_no_correlation() -> None:
    assert np.isnan(spearman(np.array([[1.0, 1.0, 1.0]]), np.array([1.0, 2.0, 3.0]))[0])


def test_a_row_with_one_seed_gives_no_interval() -> None:
    rows = [(25.0, np.array([30.0, 30.4])), (25.5, np.array([31.0])), (26.0, np.array([32.0, 31.8]))]
    rho, interval = agreement(rows)
    assert rho == pytest.approx(1.0) and interval is None  # one draw of one seed is that seed: nothing varies


def test_overlapping_seeds_widen_the_interval() -> None:
    apart = [(25.0, np.array([30.0, 30.2])), (25.5, np.array([31.0, 31.2])), (26.0, np.array([32.0, 32.2]))]
    assert agreement(apart) == (pytest.approx(1.0), (pytest.approx(1.0), pytest.approx(1.0)))
    mixed = [(25.0, np.array([30.0, 32.5])), (25.5, np.array([31.0, 29.0])), (26.0, np.array([32.0, 30.0]))]
    rho, (low, high) = agreement(mixed)
    assert low < rho <= high and low <= -0.5  # the seeds overlap: draws that reverse the order are in the interval
