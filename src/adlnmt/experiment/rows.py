"""The finished runs of each variant of an experiment, which the report's tables and the plots read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adlnmt.experiment.grid import Grid
from adlnmt.experiment.runner import Run


@dataclass
class Row:
    """The finished runs of one variant."""

    name: str
    results: list[dict[str, Any]]
    total: int
    significance: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (test, metric) → test

    def values(self, *path: str) -> list[Any]:
        """The value at ``path`` (keys into result.json) of every finished run; None where one lacks it."""
        found = []
        for result in self.results:
            value: Any = result
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            found.append(value)
        return found


def collect(grid: Grid, runs: list[Run]) -> list[Row]:
    """One row per variant of ``grid``, in grid order, of the results of its ``runs``."""
    by_variant = {v.name: [r for r in runs if r.variant.name == v.name] for v in grid.variants}
    rows = []
    for name, variant_runs in by_variant.items():
        results = [result for run in variant_runs if (result := run.result()) is not None]
        rows.append(Row(name, results, len(variant_runs)))
    return rows
