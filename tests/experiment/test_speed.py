"""The grid's ``speed:`` section: whole-command timings of finished runs, their record, the report's section with
the Pareto plot, its speed claims judged with the grid's other claims (claims.md, claims.json, the verdict page),
and the section's errors."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml

from adlnmt.bench.machine import PROC_STAT
from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.experiment import speed
from adlnmt.experiment.checks import check_speed_machine
from adlnmt.experiment.grid import Grid, load_grid
from adlnmt.experiment.judge import Judge, write_claims
from adlnmt.experiment.runner import STOPPED, Outcome, Run
from adlnmt.experiment.speed import SPEED_FILE, Measurement, Point, SpeedRecord, median_interval, pareto
from adlnmt.experiment.speed_spec import SpeedSpec
from adlnmt.metrics import score
from adlnmt.verdicts.claims import Claim, Judgement
from adlnmt.verdicts.page import verdict_table
from adlnmt.verdicts.statistics import FAILS, HOLDS, NOT_CONVERGED, NOT_TIMED, ONE_SEED, OPEN

from .test_judge import REFERENCES, write_runs

TINY = {"d_model": 32, "heads": 4, "batch_tokens": 600, "max_updates": 6, "checkpoint_interval": 3, "lr": 2e-3}
ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODER = "pos -> repeat(1, res_nd({x}) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"
SPEED = {"engines": ["torch", "ctranslate2", "onnxruntime"], "beams": [1, 2], "repeats": 2, "lines": 12, "threads": 1,
         "claims": [{"quote": "aan decodes faster", "where": "§5", "faster": ["aan", "transformer"], "ratio": 1.5,
                     "beam": 2, "engine": "torch"}]}  # fmt: skip


def grid_file(root: Path, corpus: Path, speed: dict | None = None) -> Path:
    grid = {
        "name": "speedy",
        "data": {"train_src": str(corpus / "train.src"), "train_tgt": str(corpus / "train.tgt"),
                 "valid_src": str(corpus / "valid.src"), "valid_tgt": str(corpus / "valid.tgt"), "vocab_size": 150},
        "test": [{"name": "test", "src": str(corpus / "test.src"), "ref": str(corpus / "test.tgt")}],
        "metrics": ["chrf", "bleu"],  # the first scores the timed outputs: chrF is above 0 for such tiny models
        "seeds": [1],
        "bootstrap_resamples": 200,
        "translate": {"beam": 2},
        "train": {**TINY, "valid_bleu": False},
        "variants": [{"name": "transformer", "encoder": ENCODER, "decoder": DECODER.format(x="mh_dot_self_att")},
                     {"name": "aan", "encoder": ENCODER, "decoder": DECODER.format(x="aan")}],
        "speed": speed if speed is not None else SPEED,
    }  # fmt: skip
    path = root / "grid.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


def experiment(*argv: str) -> tuple[int, str]:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        status = main(["experiment", *argv])
    return status, output.getvalue()


class Quiet:
    """A machine where nothing else ran beside the timings (the test's verdicts must not read this machine's load)."""

    def cores(self) -> float:
        return 0.0


def quiet(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Every timing, in this process and in the workers, reads a machine where nothing else runs: CPU counters that
    never move (--retime's test sets too: a loaded machine would otherwise skip them)."""
    stat = folder / "stat"
    stat.write_text("cpu  100 0 100 1000 0 0 0 0 0 0\n")
    monkeypatch.setenv(PROC_STAT, str(stat))
    monkeypatch.setattr("adlnmt.bench.machine.BusyBeside", Quiet)


def test_finished_runs_are_timed_once_and_reported(demo_data: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'adlnmt[ct2]'")
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed: pip install 'adlnmt[onnx]'")
    quiet(monkeypatch, tmp_path)
    out = tmp_path / "out"
    args = (str(grid_file(tmp_path, demo_data / "corpus")), "--out", str(out), "--threads", "1")
    status, stdout = experiment(*args)
    assert status == 0, stdout
    assert "speed of transformer seed 1: torch beam 1" in stdout and "speed of aan seed 1" in stdout
    records = {name: json.loads((out / "runs" / name / "seed-1" / SPEED_FILE).read_text())
               for name in ("transformer", "aan")}  # fmt: skip
    for name, record in records.items():
        assert record["settings"]["beams"] == [1, 2] and record["machine"]["threads"] == 1
        assert record["machine"]["cpu"] and record["machine"]["load_average"] is not None
        timed = {(m["engine"], m["beam"]): m for m in record["measurements"]}
        assert set(timed) == {(engine, beam) for engine in SPEED["engines"] for beam in (1, 2)}
        for (engine, _), m in timed.items():
            if name == "aan" and engine == "ctranslate2":  # CTranslate2 runs Transformers only
                assert m["seconds"] == [] and "aan" in m["skipped"]
            else:
                assert len(m["seconds"]) == 2 and all(s > 0 for s in m["seconds"]) and m["sentences"] == 12
                assert len(m["load"]) == 2 and len(m["busy_beside"]) == 2 and 0 <= m["score"] <= 100
    # the timed output is scored: the torch engine at the run's own beam writes the run's own first 12 lines
    hypotheses = (out / "runs" / "transformer" / "seed-1" / "hyp" / "test.txt").read_text().splitlines()[:12]
    references = (demo_data / "corpus" / "test.tgt").read_text().splitlines()[:12]
    own = next(m for m in records["transformer"]["measurements"] if (m["engine"], m["beam"]) == ("torch", 2))
    assert own["score"] == pytest.approx(score(hypotheses, references, ["chrf"])["chrf"]) and own["score"] > 0
    report = (out / "report.md").read_text()
    assert "## Decoding speed (whole commands)" in report and "plots/speed-pareto.png" in report
    assert (out / "plots" / "speed-pareto.png").stat().st_size > 0
    assert "| transformer | ctranslate2 | 2 |" in report and "Not timed: aan (ctranslate2:" in report
    assert "judged with the grid's other claims in [claims.md](claims.md)" in report
    assert "`adlnmt translate` on the first 12 line(s) of test, timed" in report and "1 thread(s), 2 repeats" in report
    (claim,) = json.loads((out / "claims.json").read_text())["claims"]
    assert claim["tested_as"] == "aan ≥ 1.5 × transformer (whole command, torch, beam 2)"
    # six updates: each run's best checkpoint is its last, so the timed comparison reads "not converged"
    assert not claim["timed_beside_other_work"] and claim["seed_list"] == "1"
    assert claim["verdict"] == NOT_CONVERGED and "aan seed 1" in (out / "claims.md").read_text()
    lines = (out / "speed.csv").read_text().splitlines()
    assert "| aan | onnxruntime | 2 |" in report  # the export CTranslate2 cannot run, timed on ONNX Runtime
    assert lines[0].startswith("variant,engine,beam,seed") and len(lines) == 1 + 10

    before = {name: (out / "runs" / name / "seed-1" / SPEED_FILE).stat().st_mtime_ns for name in records}
    status, stdout = experiment(*args)  # finished and timed: nothing is timed again
    assert status == 0 and "speed of" not in stdout
    assert before == {name: (out / "runs" / name / "seed-1" / SPEED_FILE).stat().st_mtime_ns for name in records}
    fewer = {**SPEED, "engines": ["torch"], "beams": [1], "repeats": 1, "workers": 2, "claims": []}
    status, stdout = experiment(str(grid_file(tmp_path, demo_data / "corpus", fewer)), *args[1:])
    assert status == 0 and "speed of transformer seed 1: torch beam 1" in stdout  # other settings: timed again
    assert "ctranslate2" not in (out / "runs" / "aan" / "seed-1" / SPEED_FILE).read_text()
    assert json.loads((out / "runs" / "aan" / "seed-1" / SPEED_FILE).read_text())["settings"]["workers"] == 2
    assert "1 thread(s) and 2 workers, 1 repeats" in (out / "report.md").read_text()
    before = {name: (out / "runs" / name / "seed-1" / SPEED_FILE).read_text() for name in records}
    (out / "runs" / "aan" / "seed-1" / "model").rename(out / "elsewhere")  # its weights not on this machine
    status, stdout = experiment(str(grid_file(tmp_path, demo_data / "corpus", fewer)), *args[1:], "--retime")
    assert status == 0 and "speed of transformer seed 1: torch beam 1" in stdout  # timed again, though current
    assert "speed of aan seed 1: not timed, its model is not on this machine" in stdout
    assert "--retime: 2 timing(s) not taken in full or not alone" in stdout  # test set and speed: a lane retries
    assert (out / "runs" / "transformer" / "seed-1" / SPEED_FILE).read_text() != before["transformer"]
    assert (out / "runs" / "aan" / "seed-1" / SPEED_FILE).read_text() == before["aan"]
    (out / "elsewhere").rename(out / "runs" / "aan" / "seed-1" / "model")

    (out / "runs" / "aan" / "seed-1" / SPEED_FILE).unlink()  # untimed, and the command is stopped by a signal
    stopped = lambda grid, selected, *_: [Outcome(run, STOPPED["SIGTERM"], 0.0, None) for run in selected]  # noqa: E731
    monkeypatch.setattr("adlnmt.experiment.commands.run_selected", stopped)
    status, stdout = experiment(*args)
    assert status == 0 and "speed of" not in stdout and "stopped by a signal: no decoding timed" in stdout
    assert not (out / "runs" / "aan" / "seed-1" / SPEED_FILE).exists()
    monkeypatch.undo()  # run again: a timing that fails is said, the others go on, the report is written
    quiet(monkeypatch, tmp_path)
    (out / "report.md").unlink()
    timed = speed.time_run

    def failing(run: Run, *rest: object) -> SpeedRecord:
        if run.variant.name == "aan":
            raise UserError("aan seed 1: timing torch beam 1 failed (exit status 2): error: out of luck")
        return timed(run, *rest)

    monkeypatch.setattr(speed, "time_run", failing)
    status, stdout = experiment(*args)
    assert status == 1 and "speed of aan seed 1: not timed: aan seed 1: timing torch beam 1 failed" in stdout
    assert (out / "report.md").is_file() and not (out / "runs" / "aan" / "seed-1" / SPEED_FILE).exists()


def point(variant: str, speeds: dict[int, float], score: float | None = 30.0, beam: int = 5) -> Point:
    """A point whose runs decoded 100 sentences in 100 / speed seconds, every repeat alike."""
    return Point(variant, "torch", beam, {seed: Measurement("torch", beam, 100, (100 / s,) * 3, (0.5,) * 3, (0.0,) * 3,
                                                           score=score) for seed, s in speeds.items()})  # fmt: skip


def test_median_intervals_state_their_coverage() -> None:
    assert median_interval([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0, 0.75)
    assert median_interval([5.0, 1.0, 4.0, 2.0, 3.0]) == (3.0, 1.0, 5.0, 0.9375)
    median, low, high, coverage = median_interval([float(x) for x in range(1, 11)])
    assert (median, low, high) == (5.5, 2.0, 9.0) and coverage == pytest.approx(1 - 2 * 11 / 1024)  # [3, 8]: 89 %


def test_the_pareto_frontier_keeps_the_undominated() -> None:
    fast, good, both_worse, unscored = (point("fast", {1: 50}, 20.0), point("good", {1: 10}, 30.0),
                                        point("worse", {1: 9}, 25.0), point("none", {1: 99}, None))  # fmt: skip
    assert [p.variant for p in pareto([fast, good, both_worse, unscored])] == ["fast", "good"]


REGISTERED = "abc1234 2026-11-20T08:00:00+00:00"


def timed_grid(tmp_path: Path, claims: list[dict], repeats: int = 3) -> Grid:
    """A grid of four rows on three seeds whose ``speed:`` section times beam 5 with torch, with ``claims``."""
    (tmp_path / "ref.txt").write_text("\n".join(REFERENCES) + "\n")
    files = {f"{s}_{side}": "ref.txt" for s in ("train", "valid") for side in ("src", "tgt")}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({
        "name": "timed", "seeds": [1, 2, 3], "data": files, "bootstrap_resamples": 500,
        "test": [{"name": "t", "src": "ref.txt", "ref": "ref.txt"}],
        "train": {"d_model": 32, "heads": 4, "patience": 3},
        "variants": [{"name": name, "preset": "transformer-small"} for name in ("fast", "slow", "alone", "untimed")],
        "speed": {"beams": [5], "repeats": repeats, "claims": claims},
    }))  # fmt: skip
    return load_grid(path)


def time_runs(grid: Grid, out: Path, seconds: dict[tuple[str, int], tuple[float, ...]],
              finished: tuple[tuple[str, int], ...] = (), cpu: dict[tuple[str, int], str] | None = None,
              busy: dict[tuple[str, int], float] | None = None) -> list[Run]:  # fmt: skip
    """Finished runs of ``seconds``' (variant, seed) and of ``finished``, each with a ``speed.json`` of its repeats'
    wall seconds for 100 sentences (``finished`` alone: none), timed within the hour on one processor (or ``cpu``'s)
    with nothing beside them (or ``busy``'s cores), scored 30."""
    runs = write_runs(grid, out, {key: {"tests": {"t": REFERENCES}} for key in (*seconds, *finished)})
    for run in runs:
        if (times := seconds.get(key := (run.variant.name, run.seed))) is not None:
            result = run.result()
            processor = (cpu or {}).get(key, "AMD EPYC")
            machine = {"cpu": processor, "cpu_capability": "AVX2", "date": "2026-11-28T12:00:00+00:00", "threads": 2}
            beside = ((busy or {}).get(key, 0.0),) * len(times)
            timing = Measurement("torch", 5, 100, times, (0.5,) * len(times), beside, score=30.0)
            run.archive.mkdir(parents=True, exist_ok=True)
            SpeedRecord(result.fingerprint, result.checkpoint, grid.speed.settings(), machine, (timing,)).save(
                run.archive / SPEED_FILE
            )
    return runs


def faster(quote: str, first: str, second: str, ratio: float) -> dict:
    return {"quote": quote, "faster": [first, second], "ratio": ratio, "beam": 5, "registered": REGISTERED}


def test_speed_claims_are_judged_with_the_other_claims(tmp_path: Path) -> None:
    """A speed claim of the section is judged by the claims' rules: the geometric mean speed ratio over the seeds
    timed for both rows, its interval, one Holm family with the claims registered together, a verdict word; rows
    with finished runs but no timing read "not timed yet", and are listed, not dropped."""
    grid = timed_grid(
        tmp_path,
        [
            faster("three times", "fast", "slow", 3.0),
            faster("ten times", "fast", "slow", 10),
            faster("one seed", "fast", "alone", 1.0),
            faster("untimed", "fast", "untimed", 1.0),
        ],
    )
    noise = (0.99, 1.0, 1.02)
    seconds = {**{("fast", s): tuple(100 / v * n for n in noise) for s, v in ((1, 40), (2, 44), (3, 42))},
               **{("slow", s): tuple(100 / v * n for n in noise) for s, v in ((1, 8), (2, 8.5), (3, 8.2))},
               ("alone", 3): (100.0, 101.0, 99.0)}  # fmt: skip
    untimed = (("alone", 1), ("alone", 2), ("untimed", 1), ("untimed", 2))
    runs = time_runs(grid, tmp_path / "out", seconds, finished=untimed)
    judged = {j.claim.quote: j for j in Judge(grid, runs).judge_all()}
    three = judged["three times"]
    assert three.verdict == HOLDS and three.seeds == ((1, 2, 3), (1, 2, 3))
    speeds = [(40 / 8), (44 / 8.5), (42 / 8.2)]
    assert three.tested.effect == pytest.approx((speeds[0] * speeds[1] * speeds[2]) ** (1 / 3))  # geometric mean
    assert three.tested.interval[0] < three.tested.effect < three.tested.interval[1] and three.tested.level == 0.9
    assert (three.family, three.family_size) == ("abc1234, primary", 4)
    assert judged["ten times"].verdict == FAILS
    alone = judged["one seed"]
    assert (alone.verdict, alone.seeds, alone.untimed) == (ONE_SEED, ((3,), (3,)), ("alone seed 1", "alone seed 2"))
    missing = judged["untimed"]
    assert (missing.verdict, missing.tested, missing.untimed) == (NOT_TIMED, None, ("untimed seed 1", "untimed seed 2"))

    out = tmp_path / "report"
    out.mkdir()
    write_claims(grid, runs, out)
    claims = {c["quote"]: c for c in json.loads((out / "claims.json").read_text())["claims"]}
    assert list(claims) == ["three times", "ten times", "one seed", "untimed"]  # every claim, none dropped
    assert claims["untimed"]["verdict"] == NOT_TIMED and claims["untimed"]["untimed"] == [
        "untimed seed 1",
        "untimed seed 2",
    ]
    assert (claims["three times"]["engine"], claims["three times"]["beam"]) == ("torch", 5)
    assert claims["three times"]["tested_as"] == "fast ≥ 3 × slow (whole command, torch, beam 5)"
    assert claims["three times"]["summary"].startswith("×5.") and claims["three times"]["level"] == 0.9
    text = (out / "claims.md").read_text()
    assert "Speed claims timed as whole commands" in text and "**not timed yet** (no timing: untimed seed 1" in text
    page = verdict_table([out], tmp_path)
    assert "H1: fast ≥ 3 × slow (whole command, torch, beam 5)" in page
    assert "| **not timed yet** (no timing: untimed seed 1; untimed seed 2) |" in page


def test_a_speed_claims_interval_is_over_the_timing_repeats(tmp_path: Path) -> None:
    """With one seed per row, the interval comes from the repeats alone: none when the repeats agree, wide when
    they scatter (and the verdict then stays open); the claim reads one seed either way."""
    grid = timed_grid(tmp_path, [faster("twice", "fast", "slow", 2.0)], repeats=5)

    def judged(fast: tuple[float, ...], folder: str) -> Judgement:
        runs = time_runs(grid, tmp_path / folder, {("fast", 1): fast, ("slow", 1): (10.0,) * 5})
        (j,) = Judge(grid, runs).judge_all()
        return j

    steady = judged((4.0,) * 5, "steady")
    assert steady.tested.interval == pytest.approx((2.5, 2.5)) and steady.measured == HOLDS
    scattered = judged((2.0, 3.0, 4.0, 6.0, 9.0), "scattered")
    low, high = scattered.tested.interval
    assert scattered.tested.effect == pytest.approx(10 / 4.0) and low < 2.0 < high and scattered.measured == OPEN
    assert steady.verdict == scattered.verdict == ONE_SEED


def test_a_speed_claim_registers_like_the_grids_claims(demo_data: Path, tmp_path: Path) -> None:
    claim = {"quote": "q", "faster": ["aan", "transformer"], "ratio": 2, "beam": 1, "registered": REGISTERED}
    grid = load_grid(str(grid_file(tmp_path, demo_data / "corpus", {**SPEED, "claims": [claim]})), None)
    assert grid.speed.claims == (Claim("q", "", "faster", "aan", "transformer", 0.0, "sentences_per_s", "test", 2.0,
                                       registered="abc1234", registered_at="2026-11-20T08:00:00+00:00",
                                       engine="torch", beam=1),)  # fmt: skip
    with pytest.raises(UserError, match=r"speed\.claims\[0\]\.registered: expected 'COMMIT DATE'"):
        load_grid(str(grid_file(tmp_path, demo_data / "corpus", {**SPEED, "claims": [{**claim, "registered": "x"}]})))


@pytest.mark.parametrize(
    ("speed", "message"),
    [
        ({"engine": ["torch"]}, r"speed\.engine: unknown key \(did you mean 'engines'\?\)"),
        ({"engines": ["marian"]}, r"speed\.engines\[0\]: unknown engine"),
        ({"precision": "fp8"}, r"speed\.precision: unknown precision"),
        ({"repeats": 0}, r"speed\.repeats: must be at least 1, got 0"),
        ({"workers": 0}, r"speed\.workers: must be at least 1, got 0"),
        ({"test": "nope"}, r"speed\.test: unknown test set"),
        ({"beams": [1, 1]}, r"speed\.beams: values must be distinct"),
        ({"beams": [2, 0]}, r"speed\.beams\[1\]: must be a positive integer of at most 4294967295, got 0"),
        (
            {"claims": [{"quote": ["q"], "faster": ["aan", "transformer"], "ratio": 2}]},
            r"claims\[0\]\.quote: expected non",
        ),
        (
            {"beams": [1, 1000]},
            r"speed\.beams: a beam of 1000 is wider than the target vocabulary of 'transformer' "
            r"\(150 pieces\)",
        ),
        ({"claims": 5}, r"speed\.claims: expected a list of claims, got int 5"),
        ({"claims": "faster"}, r"speed\.claims: expected a list of claims, got str 'faster'"),
        ({"claims": {"faster": ["aan", "transformer"]}}, r"speed\.claims: expected a list of claims, got dict"),
        ({"claims": [{"quote": "q", "faster": ["aan", "rnn"], "ratio": 2}]}, r"claims\[0\]\.faster: unknown variant"),
        ({"claims": [{"quote": "q", "faster": ["aan", "transformer"], "ratio": 0}]}, r"\.ratio: expected a positive"),
        (
            {"claims": [{"quote": "q", "faster": ["aan", "transformer"], "ratio": 2, "beam": 4}]},
            r"\.beam: 4 is not among the timed beams \[1, 5\]",
        ),
    ],
)
def test_a_bad_speed_section_names_its_key(demo_data: Path, tmp_path: Path, speed: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        load_grid(str(grid_file(tmp_path, demo_data / "corpus", speed)), None)


def test_more_threads_or_workers_than_cores_are_refused_before_anything_trains(
    demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    for key in ("threads", "workers"):
        grid = grid_file(tmp_path, demo_data / "corpus", {key: 3})
        for more in (["--dry-run"], []):
            status, _ = experiment(str(grid), "--out", str(tmp_path / "out"), *more)
            assert status == 2 and not (tmp_path / "out").exists()
    with pytest.raises(UserError, match=r"grid\.yaml: speed\.workers 3: this machine has 2 CPU core\(s\)"):
        check_speed_machine(load_grid(str(grid), None))


def test_the_speed_section_is_optional_and_has_defaults(demo_data: Path, tmp_path: Path) -> None:
    grid = load_grid(str(grid_file(tmp_path, demo_data / "corpus", {})), None)
    assert grid.speed == SpeedSpec("test")
    assert grid.speed.beams == (1, 5) and grid.speed.engines == ("torch",)


def test_the_speed_table_keeps_processors_apart_and_leaves_out_timings_beside_other_work(tmp_path: Path) -> None:
    """A row pooled the speeds of two processors (one median of an EPYC's and a Xeon's repeats), and counted
    repeats timed beside other work with a "compare with care"; each processor now has its rows and Pareto
    frontier, and a timing beside other work is left out of the table, named, and kept in speed.csv."""
    grid = timed_grid(tmp_path, [])
    seconds = {("fast", 1): (2.0,) * 3, ("fast", 2): (4.0,) * 3, ("slow", 1): (10.0,) * 3, ("slow", 2): (20.0,) * 3,
               ("alone", 1): (3.0,) * 3}  # fmt: skip
    cpu = {("fast", 2): "Intel Xeon", ("slow", 2): "Intel Xeon"}
    runs = time_runs(grid, tmp_path / "out", seconds, cpu=cpu, busy={("alone", 1): 1.0})
    found, beside = speed.points(grid, speed.timed_records(grid, runs))
    assert [(p.variant, p.processor, p.sentences_per_s) for p in found] == [
        ("fast", "AMD EPYC (AVX2)", 50.0), ("fast", "Intel Xeon (AVX2)", 25.0),
        ("slow", "AMD EPYC (AVX2)", 10.0), ("slow", "Intel Xeon (AVX2)", 5.0),
    ]  # fmt: skip
    assert beside == ["alone seed 1 (torch beam 5)"]
    out = tmp_path / "report"
    section = "\n".join(speed.speed_section(grid, runs, out))
    assert "| fast | torch | 5 | Intel Xeon (AVX2) | 30.00 | 25.0 |" in section  # the Xeon's own Pareto point
    assert section.count("| ● |") == 2 and "| alone |" not in section
    assert "Left out (timed with more than 0.5 cores busy beside a repeat" in section and "alone seed 1" in section
    assert "speeds compare only within one" in section
    lines = (out / "speed.csv").read_text().splitlines()
    assert lines[0].startswith("variant,engine,beam,seed,processor,") and len(lines) == 1 + 5
    assert "alone,torch,5,1,AMD EPYC (AVX2),100," in "\n".join(lines) and lines[-1].endswith(",yes,30.00")
    alone = speed.speed_section(grid, [run for run in runs if run.variant.name == "alone"], out)
    assert "No finished run timed yet" not in alone[-1] and "Left out" in alone[-1]  # said, with no table


def test_the_speed_table_takes_the_run_as_its_unit(tmp_path: Path) -> None:
    """Two runs of three repeats each were pooled as six independent repeats: [1.00, 3.20] read as a 97 % interval of
    the median, though the repeats of a run share its session; the runs' median repeats are the unit now (two of
    them: [1.10, 3.10], 50 %), and one run keeps its repeats' interval."""
    grid = timed_grid(tmp_path, [])
    seconds = {("fast", 1): (1.0, 1.1, 1.2), ("fast", 2): (3.0, 3.1, 3.2), ("slow", 1): (4.0, 5.0, 6.0)}
    runs = time_runs(grid, tmp_path / "out", seconds)
    section = "\n".join(speed.speed_section(grid, runs, tmp_path / "report"))
    assert "| fast | torch | 5 | 30.00 | 47.6 | 2.10 [1.10, 3.10] (50%) | 2 × 3 |" in section
    assert "| slow | torch | 5 | 30.00 | 20.0 | 5.00 [4.00, 6.00] (75%) | 1 × 3 |" in section
