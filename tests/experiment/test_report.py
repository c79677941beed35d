"""The report's comparison with the paper: Spearman's rank correlation of our scores with the published ones."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from adlnmt.experiment.report import paper_agreement, ranks
from adlnmt.experiment.rows import Row


def test_ranks_share_ties() -> None:
    assert ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]


def grid_and_rows(ours: dict[str, float | None], paper: dict[str, float]) -> tuple[SimpleNamespace, list[Row]]:
    variants = [SimpleNamespace(name=name, paper={"IWSLT": paper[name]} if name in paper else {}) for name in ours]
    grid = SimpleNamespace(tests=[SimpleNamespace(name="test")], metrics=["bleu"], variants=variants)
    rows = [Row(name, [] if score is None else [{"tests": {"test": {"scores": {"bleu": score}}}}], 2)
            for name, score in ours.items()]  # fmt: skip
    return grid, rows


@pytest.mark.parametrize(
    ("ours", "expected"),
    [
        ({"a": 30.0, "b": 31.0, "c": 32.0, "d": None}, "IWSLT ρ = +1.00 (3 rows)"),  # d not finished: left out
        ({"a": 32.0, "b": 31.0, "c": 30.0, "d": 29.0}, "IWSLT ρ = -1.00 (4 rows)"),
    ],
)
def test_rank_agreement_with_the_paper(ours: dict[str, float | None], expected: str) -> None:
    grid, rows = grid_and_rows(ours, {"a": 25.0, "b": 25.5, "c": 26.0, "d": 26.5})
    assert expected in paper_agreement(grid, rows)


def test_no_agreement_line_below_three_rows() -> None:
    grid, rows = grid_and_rows({"a": 30.0, "b": 31.0, "c": None}, {"a": 25.0, "b": 25.5, "c": 26.0})
    assert paper_agreement(grid, rows) == ""
