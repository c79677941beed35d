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

    def by_device(self, timed: bool = False) -> list[tuple[str, Row]]:
        """This row's runs grouped by the kind of device they trained on (``timed``: the one their decoding speed was
        last measured on), as (kind, row of those runs): a CPU's minutes and a GPU's do not average."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for result in self.results:
            groups.setdefault(device_kind(run_machine(result, timed)), []).append(result)
        return [(kind, Row(self.name, results, self.total)) for kind, results in groups.items()]


def run_machine(result: dict[str, Any], timed: bool = False) -> dict[str, Any]:
    """The machine record of the run's training, or (``timed``) of its last decoding-speed measurement (``--retime``
    or, when not retimed, the one it finished on)."""
    trained = result.get("provenance", {}).get("machine", {})
    return (result.get("retimed", {}).get("machine") or trained) if timed else trained


def device_kind(machine: dict[str, Any]) -> str:
    """'CPU', or the GPU's name."""
    return "CPU" if machine.get("device", "cpu") == "cpu" else str(machine.get("device_name", "GPU"))


def collect(grid: Grid, runs: list[Run]) -> list[Row]:
    """One row per variant of ``grid``, in grid order, of the results of its ``runs``."""
    by_variant = {v.name: [r for r in runs if r.variant.name == v.name] for v in grid.variants}
    rows = []
    for name, variant_runs in by_variant.items():
        results = [result for run in variant_runs if (result := run.result()) is not None]
        rows.append(Row(name, results, len(variant_runs)))
    return rows
