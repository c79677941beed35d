"""experiments/analysis/machine_effect.py: a machine's shift within rows, with a permutation p, from archived runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from experiment.sample_results import machine, run_result, scored

from .scripts import analysis_script

ROWS = {"a": 30.0, "b": 34.0, "c": 38.0}  # row means far apart: the test is within rows
NOISE = [0.3, -0.2, 0.1, -0.3, 0.2, -0.1]


@pytest.fixture(scope="module")
def machine_effect():
    yield from analysis_script("machine_effect")


def archive(tmp_path: Path, shift: float) -> Path:
    """Three rows of six seeds: seeds 1-3 on the CPU (evaluated first), 4-6 on a GPU that scores ``shift`` higher."""
    for row, mean in ROWS.items():
        for seed in range(1, 7):
            gpu = seed > 3
            on = machine("cuda:0" if gpu else "cpu", date=f"2026-11-2{5 + gpu}T12:00:00+00:00")
            score = mean + NOISE[seed - 1] + (shift if gpu else 0.0)
            result = run_result(seed, on=on, variant=row, tests={"test": scored({"bleu": score})})
            folder = tmp_path / "runs" / row / f"seed-{seed}"
            (folder / "hyp").mkdir(parents=True)
            (folder / "hyp" / "test.txt").write_text("a b c\n" if gpu else "a b\n")
            result.save(folder / "result.json")
    return tmp_path


def test_a_known_shift_is_found_within_rows_and_no_shift_is_not(machine_effect, tmp_path: Path) -> None:
    runs = machine_effect.read_runs(archive(tmp_path / "shifted", 1.0), "test", "bleu", ["a b c"])
    assert [run.machine for run in runs[:9]] == ["AMD EPYC (AVX2)"] * 9  # the earliest evaluated: the reference
    rows, machines = [run.row for run in runs], [run.machine for run in runs]
    scores = np.array([run.score for run in runs])
    names = ["AMD EPYC (AVX2)", "NVIDIA H200"]
    model = machine_effect.fit(rows, machines, scores, names)
    shift, dof = model.shifts, model.dof
    assert shift[0] == pytest.approx(1.0 + np.mean(NOISE[3:]) - np.mean(NOISE[:3])) and dof == 18 - 4
    assert machine_effect.permutation_p(rows, machines, scores, names, permutations=400)[0] < 0.01
    same = np.array([ROWS[run.row] + NOISE[run.seed - 1] for run in runs])  # the shift taken out
    assert machine_effect.permutation_p(rows, machines, same, names, permutations=400)[0] > 0.2
    text = machine_effect.table(runs, "bleu", permutations=200)
    assert "| NVIDIA H200 | 9 | 4, 5, 6 | +0.87 [" in text and "| AMD EPYC (AVX2) | 9 | 1, 2, 3 | reference" in text
    assert text.rstrip().endswith("| 1.000 |") and "| 0.667 |" in text  # hyp/ref words: 3/3 and 2/3


def test_a_contrast_of_rows_run_on_different_machines_is_given_without_the_machines_shift(
    machine_effect, tmp_path: Path
) -> None:
    runs = machine_effect.read_runs(archive(tmp_path, 1.0), "test", "bleu", None)
    unbalanced = [run for run in runs if not (run.row == "a" and run.seed > 3)]  # row a on the CPU only
    measured, without = machine_effect.adjusted(unbalanced, "a", "b")
    truth = ROWS["a"] - ROWS["b"]
    assert measured == pytest.approx(truth + np.mean(NOISE[:3]) - 0.5)  # b's GPU seeds lift it by half the shift
    assert without == pytest.approx(truth)  # on the CPU both rows have seeds 1-3, the same noise
    assert machine_effect.adjusted(runs, "a", "b") == pytest.approx((truth, truth))  # balanced: nothing to take out


def test_the_t_quantile_is_close_to_the_table(machine_effect) -> None:
    assert machine_effect.t_quantile(10) == pytest.approx(2.228, abs=0.02)
