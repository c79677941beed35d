"""The finished runs of each variant of an experiment, which the report's tables and the plots read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adlnmt.experiment.arithmetic import row_result
from adlnmt.experiment.grid import Grid
from adlnmt.experiment.results import RunResult
from adlnmt.experiment.runner import Run


@dataclass
class Row:
    """The finished runs of one variant."""

    name: str
    results: list[RunResult]
    total: int
    significance: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (test, metric) → test

    def values(self, value: Callable[[RunResult], Any]) -> list[Any]:
        """``value(result)`` of every finished run (None where one lacks it)."""
        return [value(result) for result in self.results]

    def by_device(self, timed: bool = False) -> list[tuple[str, Row]]:
        """This row's runs grouped by the kind of device they trained on (``timed``: the one their decoding speed was
        last measured on), as (kind, row of those runs): a CPU's minutes and a GPU's do not average."""
        groups: dict[str, list[RunResult]] = {}
        for result in self.results:
            groups.setdefault(result.machine(timed).kind, []).append(result)
        return [(kind, Row(self.name, results, self.total)) for kind, results in groups.items()]


def collect(grid: Grid, runs: list[Run]) -> list[Row]:
    """One row per variant of ``grid``, in grid order, of the results of its ``runs`` (those in IEEE fp32:
    :mod:`adlnmt.experiment.arithmetic`)."""
    by_variant = {v.name: [r for r in runs if r.variant.name == v.name] for v in grid.variants}
    rows = []
    for name, variant_runs in by_variant.items():
        results = [result for run in variant_runs if (result := row_result(run)) is not None]
        rows.append(Row(name, results, len(variant_runs)))
    return rows
