"""The report's comparison with the paper (Spearman's rank correlation of our scores with the published ones) and
its note on the processors the speeds were measured on, and its times kept apart per kind of device."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from adlnmt.experiment.report import (
    add_significance,
    compute_line,
    decoding_conditions,
    device_time,
    length_table,
    markdown_table,
    paper_agreement,
    runs_csv,
    significance_table,
    time_cell,
    time_mean,
    timing_processors,
    unfinished_line,
)
from adlnmt.experiment.results import Evaluation, FirstTiming, Retimed, RunResult
from adlnmt.experiment.rows import Row
from adlnmt.verdicts.statistics import Scorer, brevity_penalty

from .sample_results import CODE, machine, run_result, scored


def grid_and_rows(ours: dict[str, float | None], paper: dict[str, float]) -> tuple[SimpleNamespace, list[Row]]:
    variants = [SimpleNamespace(name=name, paper={"IWSLT": paper[name]} if name in paper else {}) for name in ours]
    grid = SimpleNamespace(tests=[SimpleNamespace(name="test")], metrics=["bleu"], variants=variants)
    rows = [Row(name, [] if score is None else [run_result(tests={"test": scored({"bleu": score})})], 2)
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


def test_runs_timed_on_different_processors_are_listed() -> None:
    def run(seed: int, capability: str, device: str = "cpu") -> RunResult:
        return run_result(seed, on=machine(device, capability))

    assert timing_processors([Row("a", [run(1, "AVX2"), run(2, "AVX2")], 2), Row("b", [run(1, "AVX2")], 2)]) == ""
    note = timing_processors([Row("a", [run(1, "AVX2"), run(2, "AVX512")], 2), Row("b", [run(1, "AVX2", "cuda")], 2)])
    assert note.endswith("AMD EPYC (AVX2): a seed 1; AMD EPYC (AVX512): a seed 2; NVIDIA H200: b seed 1.")


def timed_run(minutes: float, device: str, retimed_on: str | None = None) -> RunResult:
    first = FirstTiming(machine=machine(device), tests={})
    retimed = Retimed(machine=machine(retimed_on), code=CODE, before=first) if retimed_on else None
    return run_result(on=machine(device), train_minutes=minutes, retimed=retimed)


def minutes(result: RunResult) -> float:
    return result.train_minutes


def test_times_average_within_one_kind_of_device_only() -> None:
    cpu_only = Row("a", [timed_run(60.0, "cpu"), timed_run(80.0, "cpu")], 2)
    assert time_cell(cpu_only, minutes, 1, timed=False) == "70.0"
    assert time_mean(cpu_only, minutes, timed=False) == 70.0
    mixed = Row("b", [timed_run(90.0, "cpu"), timed_run(3.0, "cuda:0"), timed_run(2.0, "cuda:0")], 3)
    assert time_cell(mixed, minutes, 1, timed=False) == "90.0 (CPU) / 2.5 (NVIDIA H200)"
    gpu_only = Row("d", [timed_run(3.0, "cuda:0")], 1)  # in a table whose other rows trained elsewhere: labelled
    assert time_cell(gpu_only, minutes, 1, timed=False, labelled=True) == "3.0 (NVIDIA H200)"
    assert time_cell(gpu_only, minutes, 1, timed=False) == "3.0"
    assert time_mean(mixed, minutes, timed=False) is None  # no mean of a CPU's and a GPU's minutes
    # a decoding speed counts where it was last timed: a GPU-trained run retimed on the CPU is a CPU timing
    retimed = Row("c", [timed_run(90.0, "cpu"), timed_run(3.0, "cuda:0", retimed_on="cpu")], 2)
    assert len(retimed.by_device(timed=True)) == 1 and len(retimed.by_device(timed=False)) == 2


def test_the_compute_is_summed_per_kind_of_device() -> None:
    """Each run's training and evaluation minutes (provenance: 1 + 1 in the samples), a CPU's apart from a GPU's."""
    hours = [f"2026-11-25T{hour:02d}:00:00+00:00" for hour in range(24)]
    runs = [run_result(1, on=machine(date=hours[1])), run_result(2, on=machine(date=hours[2])),
            run_result(3, on=machine("cuda:0"))]  # fmt: skip
    expected = (
        "; their wall-clock, training and evaluation, run by run: 4 min on CPU (2 runs), 2 min on NVIDIA H200 (1 run)"
    )
    assert compute_line(runs) == expected
    apart = [run_result(seed, on=machine(date=f"2026-11-{seed // 24 + 20}T{seed % 24:02d}:00:00+00:00"))
             for seed in range(1, 61)]  # fmt: skip
    assert compute_line(apart) == "; their wall-clock, training and evaluation, run by run: 2.0 h on CPU (60 runs)"


def test_runs_side_by_side_hold_the_device_once() -> None:
    """Eleven runs evaluated at the same moment held the GPU 2 minutes, not 22; one a minute later adds a minute."""
    at = "2026-11-27T08:45:00+00:00"
    together = [run_result(seed, on=machine("cuda:0", date=at)) for seed in range(1, 12)]
    assert compute_line(together) == (
        "; their wall-clock, training and evaluation, run by run: 22 min on NVIDIA H200 (11 runs; 2 min of the "
        "machine's time, up to 11 at once)"
    )
    later = run_result(12, on=machine("cuda:0", date="2026-11-27T08:46:00+00:00"))
    assert "24 min on NVIDIA H200 (12 runs; 3 min of the machine's time, up to 12 at once)" in compute_line(
        [*together, later]
    )


def test_device_time_is_the_union_of_the_spans() -> None:
    assert device_time([]) == (0.0, 0)
    assert device_time([(0.0, 10.0)]) == (10.0, 1)
    assert device_time([(0.0, 10.0), (5.0, 15.0), (20.0, 30.0)]) == (25.0, 2)
    assert device_time([(0.0, 30.0), (5.0, 10.0), (6.0, 8.0)]) == (30.0, 3)  # nested
    assert device_time([(0.0, 10.0), (10.0, 20.0)]) == (20.0, 1)  # one ends as the next starts: never 2 at once
    assert compute_line([]) == ""


def test_runs_without_a_later_test_set_leave_its_cells_to_the_runs_that_have_it() -> None:
    """A test set (or metric) added to a grid after some runs finished: the tables use the runs scored on it."""

    def run(seed: int, tests: dict[str, Evaluation]) -> RunResult:
        return run_result(seed, tests=tests)

    grid = SimpleNamespace(tests=[SimpleNamespace(name="t"), SimpleNamespace(name="later")], metrics=["bleu"],
                           variants=[SimpleNamespace(name="a", paper={})], baseline=None)  # fmt: skip
    bleu = [scored({"bleu": value}) for value in (30.0, 32.0, 20.0)]
    row = Row("a", [run(1, {"t": bleu[0]}), run(2, {"t": bleu[1], "later": bleu[2]})], 2)
    header, _, line = markdown_table(grid, [row]).splitlines()
    assert header.startswith("| variant | seeds | params | t BLEU | later BLEU |")
    assert line.startswith("| a | 2/2 | 1.0K | 31.00 ± 1.41 | 20.00 (1 of 2 seeds) |")
    rows = runs_csv(grid, [row]).splitlines()
    assert rows[1].split(",")[7:9] == ["30", ""] and rows[2].split(",")[7:9] == ["32", "20"]


def test_a_cell_without_a_stored_score_carries_no_significance_mark() -> None:
    """The mark comes from the runs' rescored outputs, the cell from their stored scores: a row without a stored
    score showed "– †"."""
    variants = [SimpleNamespace(name="base", paper={}), SimpleNamespace(name="a", paper={})]
    grid = SimpleNamespace(tests=[SimpleNamespace(name="test")], metrics=["bleu", "chrf"], baseline="base",
                           variants=variants)  # fmt: skip
    row = Row("a", [run_result(tests={"test": scored({"bleu": 30.0})})], 1)
    row.significance = {("test", metric): {"significant": True} for metric in grid.metrics}
    line = markdown_table(grid, [Row("base", [], 1), row]).splitlines()[3]
    assert line.startswith("| a | 1/1 | 1.0K | 30.00 † | – |")


def test_runs_timed_beside_busy_processes_are_named() -> None:
    def timed(busy: float | None) -> RunResult:
        evaluation = scored()
        return run_result(tests={"test": replace(evaluation, timing=replace(evaluation.timing, busy_beside=busy))})

    quiet = decoding_conditions([Row("a", [timed(None), replace(timed(0.5), seed=2)], 2)])
    assert quiet == "each run decoding with the grid's other runs stopped"
    busy = decoding_conditions([Row("a", [timed(0.1), replace(timed(1.04), seed=2)], 2)])
    assert busy.endswith("more than 0.5 cores busy** (measured; not compared in a speed claim until `--retime` on a "
                         "quiet machine): a seed 2 (1.0 cores)")  # fmt: skip


def test_the_output_length_is_sacrebleus_ratio_with_its_brevity_penalty(tmp_path: Path) -> None:
    reference = tmp_path / "test.ref"
    reference.write_text("a dog runs .\nthe cat sleeps on the mat .\n", encoding="utf-8")  # 4 + 7 tokens (13a)
    outputs = {  # (row, seed): translations
        ("short", 1): "a dog .\nthe cat sleeps .\n",  # 3 + 4 = 7 tokens
        ("short", 2): "a dog runs .\nthe cat sleeps .\n",  # 4 + 4 = 8
        ("long", 1): "a big dog runs fast .\nthe cat sleeps on the old mat .\n",  # 6 + 8 = 14
    }
    finished = {}
    for (name, seed), text in outputs.items():
        folder = tmp_path / name / str(seed)
        (folder / "hyp").mkdir(parents=True)
        (folder / "hyp" / "test.txt").write_text(text, encoding="utf-8")
        finished[(name, seed)] = (folder, run_result(seed))
    rows = [Row("short", [run_result(1), run_result(2)], 2), Row("long", [run_result(1), run_result(2)], 2)]
    grid = SimpleNamespace(tests=[SimpleNamespace(name="test")], seeds=[1, 2])
    table = length_table(grid, rows, finished, Scorer({"test": (reference, reference)}))

    short = [7 / 11, 8 / 11]
    penalty = statistics.fmean(math.exp(1 - 1 / ratio) for ratio in short)
    assert table.splitlines()[2] == (f"| short | {statistics.fmean(short):.3f} ± {statistics.stdev(short):.3f} "
                                     f"(BP {penalty:.3f}) |")  # fmt: skip
    assert table.splitlines()[3] == f"| long | {14 / 11:.3f} (BP 1.000) (1 of 2 seeds) |"  # no penalty above 1
    assert brevity_penalty([0.0, 0.5, 1.0, 1.5]).tolist() == [0.0, math.exp(-1), 1.0, 1.0]


def test_an_unfinished_run_says_whether_its_folder_is_here(tmp_path: Path) -> None:
    run = SimpleNamespace(label="a seed 1", dir=tmp_path / "runs" / "a" / "seed-1")
    run.log = run.dir / "log.txt"
    assert "no run folder here" in unfinished_line(run) and "training elsewhere" in unfinished_line(run)
    run.dir.mkdir(parents=True)
    assert "not started in" in unfinished_line(run)
    run.log.write_text("update 2/6\nresuming\n", encoding="utf-8")
    assert "failed or interrupted" in unfinished_line(run) and "resuming" in unfinished_line(run)


def test_a_row_of_one_seed_is_not_marked_different_from_the_baseline(tmp_path: Path) -> None:
    """A row of one seed has no seed variance to draw (it is unknown): its interval holds the sentences alone, so no †
    (the claims read such a row *inconclusive: one seed*); with two seeds the same outputs are tested."""
    references = [f"the dog number {i} runs across the green field ." for i in range(40)]
    reference = tmp_path / "test.ref"
    reference.write_text("\n".join(references) + "\n", encoding="utf-8")
    garbled = [line if i % 2 else "a cat sleeps ." for i, line in enumerate(references)]
    short = "the dog runs ."
    outputs = {("base", 1): references, ("base", 2): [*references[:-1], short], ("base", 3): [short, *references[1:]],
               ("worse", 1): garbled, ("worse", 2): [*garbled[:-1], short]}  # fmt: skip
    finished = {}
    for (name, seed), lines in outputs.items():
        folder = tmp_path / name / str(seed)
        (folder / "hyp").mkdir(parents=True)
        (folder / "hyp" / "test.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        finished[(name, seed)] = (folder, run_result(seed))
    scorer = Scorer({"test": (reference, reference)}, 2_000)
    for seeds, significant in (([1], False), ([1, 2], True)):
        grid = SimpleNamespace(baseline="base", tests=[SimpleNamespace(name="test")], metrics=["bleu"],
                               seeds=[1, 2, 3])  # fmt: skip
        rows = [Row("base", [], 3), Row("worse", [], 3)]
        add_significance(grid, rows, {k: v for k, v in finished.items() if k[0] == "base" or k[1] in seeds}, scorer)
        mark = rows[1].significance[("test", "bleu")]
        assert mark["interval"][1] < 0 and mark["p_value"] < 0.05  # the sentences alone exclude 0
        assert mark["significant"] is significant
        assert ("not tested: one seed" in significance_table(rows)) is not significant
