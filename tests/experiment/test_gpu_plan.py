"""The GPU calls that docs/reproductions.md plans for the next loan name real grids, scales, seeds and variants, and
each still has runs to train: a typo or a stale plan would cost minutes of a lent device, found only there."""

import re
import shlex
from pathlib import Path

import pytest

from adlnmt.experiment.commands import select
from adlnmt.experiment.folders import default_results
from adlnmt.experiment.grid import load_grid
from adlnmt.experiment.runner import plan_runs, shared_runs

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reproductions.md"
CALL = re.compile(r"^\s*(?:\w+=\S+\s+)*bash \.gpu/seeds\.sh (.+)$", re.MULTILINE)


def planned_specs(text: str) -> list[str]:
    """The GRID[@SCALE]:SEEDS:JOBS[:VARIANTS] arguments of every `.gpu/seeds.sh` call in ``text`` (a call may go on
    over lines ending in a backslash)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [spec for line in CALL.findall(joined) for spec in shlex.split(line)[2:]]


def to_train(spec: str) -> list[str]:
    """The labels of the runs ``spec`` selects that are neither archived nor shared by fingerprint."""
    grid_part, seeds, _jobs, *variants = spec.split(":", 3)
    file, _, scale = grid_part.partition("@")
    grid = load_grid(ROOT / file, scale or "cpu")
    results = default_results(grid)
    runs = [run for run in plan_runs(grid, results, results) if run.finished_in() is None]
    shared = {run.fingerprint for run, _, _ in shared_runs(grid, runs, results)}
    selected = select(grid, runs, variants[0] if variants else None, seeds)
    return [run.label for run in selected if run.fingerprint not in shared]


def test_the_page_plans_gpu_calls() -> None:
    specs = planned_specs(PAGE.read_text(encoding="utf-8"))
    assert specs, "docs/reproductions.md plans no .gpu/seeds.sh call"
    assert planned_specs('X=1 bash .gpu/seeds.sh "$OUT" 575 "a.yaml@s:1,2:4:A,B - c" b.yaml:3:1') == [
        "a.yaml@s:1,2:4:A,B - c",
        "b.yaml:3:1",
    ]
    assert planned_specs('    bash .gpu/seeds.sh "$OUT" 575 a.yaml:1:1 \\\n        "b.yaml:2:1:B C"\nnext') == [
        "a.yaml:1:1",
        "b.yaml:2:1:B C",
    ]


@pytest.mark.parametrize("spec", planned_specs(PAGE.read_text(encoding="utf-8")))
def test_each_planned_call_has_runs_to_train(spec: str) -> None:
    assert to_train(spec), f"{spec}: every run it selects is finished; take it out of docs/reproductions.md"
