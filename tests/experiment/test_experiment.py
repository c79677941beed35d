"""`adlnmt experiment` end to end on the demo corpus: 2 variants × 2 seeds of tiny models.

One sequence, shared by the tests: a first run in which one run fails (its model directory is blocked by a file),
a second run killed with SIGKILL in the middle of the failed run's training, and a third run that resumes it
while the finished runs are left alone.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from adlnmt.analysis.contrastive import write_suite
from adlnmt.analysis.demo_suite import demo_suite
from adlnmt.bench.machine import PROC_STAT, BusyBeside
from adlnmt.cli import main
from adlnmt.experiment.commands import RETIMED_IN_FULL
from adlnmt.experiment.reproduce import RERUN_MARK

TINY = {"d_model": 32, "heads": 4, "batch_tokens": 600, "max_updates": 6, "checkpoint_interval": 3, "lr": 2e-3}
ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODER = "pos -> repeat(1, res_nd({x}) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"
BLOCKED = ("b", 2)  # the run made to fail first, then killed, then resumed


def grid_file(root: Path, corpus: Path) -> Path:
    grid = {
        "name": "tiny",
        "data": {"train_src": str(corpus / "train.src"), "train_tgt": str(corpus / "train.tgt"),
                 "valid_src": str(corpus / "valid.src"), "valid_tgt": str(corpus / "valid.tgt"), "vocab_size": 150},
        "test": [{"name": "test", "src": str(corpus / "test.src"), "ref": str(corpus / "test.tgt")}],
        "metrics": ["bleu", "chrf"],
        "seeds": [1, 2],
        "baseline": "a",
        "bootstrap_resamples": 200,
        "length_buckets": [5, 8],
        "translate": {"beam": 2},
        "train": TINY,
        "claims": [{"quote": "a beats b", "where": "§1", "better": ["a", "b"]},
                   {"quote": "b replaces a with little loss", "close": ["b", "a"], "margin": 100},
                   # a ratio no timing can approach: "does not hold" whatever the load made of the two seeds' speeds
                   {"quote": "b decodes a googol times faster", "faster": ["b", "a"], "ratio": 1e100}],
        "variants": [
            {"name": "a", "encoder": ENCODER, "decoder": DECODER.format(x="mh_dot_self_att"),
             "paper": {"WMT BLEU": 27.6}},
            # longer (and quicker checkpoints), so that the kill below lands in the middle of its training
            {"name": "b", "encoder": ENCODER, "decoder": DECODER.format(x="aan"),
             "train": {"max_updates": 40, "valid_bleu": False}},
        ],
    }  # fmt: skip
    write_suite(demo_suite(size=40), root / "agreement.jsonl")  # the demo language's agreement, by construction
    grid["contrastive"] = [{"name": "agreement", "suite": str(root / "agreement.jsonl")}]
    path = root / "grid.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


def run_dir(out: Path, variant: str, seed: int) -> Path:
    return out / "runs" / variant / f"seed-{seed}"


def experiment(*argv: str) -> tuple[int, str]:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        status = main(["experiment", *argv])
    return status, output.getvalue()


def stamps(out: Path) -> dict[str, int]:
    """Modification times of what training and evaluation write, for every run but the blocked one."""
    found = {}
    for variant, seed in (("a", 1), ("a", 2), ("b", 1)):
        directory = run_dir(out, variant, seed)
        states = sorted(path.relative_to(directory).as_posix() for path in directory.glob("model/states/*.state.pt"))
        for name in (*states, "model/best.safetensors", "model/metrics.jsonl", "result.json", "hyp/test.txt"):
            found[f"{variant}/{seed}/{name}"] = (directory / name).stat().st_mtime_ns
    return found


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def quiet_machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The workers (and --retime) read CPU counters that never move: their timings count as taken with nothing else
    busy, also on a loaded machine (the claims below compare speeds)."""
    stat = tmp_path_factory.mktemp("proc") / "stat"
    stat.write_text("cpu  100 0 100 1000 0 0 0 0 0 0\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PROC_STAT, str(stat))
        yield


@pytest.fixture(scope="module")
def sequence(demo_data: Path, tmp_path_factory: pytest.TempPathFactory, quiet_machine: None) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("experiment")
    out = root / "out"
    args = (str(grid_file(root, demo_data / "corpus")), "--out", str(out), "--threads", "1")
    blocked = run_dir(out, *BLOCKED)
    blocked.mkdir(parents=True)
    (blocked / "model").write_text("not a directory")  # the trainer cannot create its model directory: it fails
    s = SimpleNamespace(out=out, args=args, blocked=blocked)
    s.first_status, s.first_stdout = experiment(*args, "--jobs", "2")
    s.first_csv = read_csv(out / "results.csv")
    s.first_table = (out / "results.md").read_text(encoding="utf-8")
    s.first_report = (out / "report.md").read_text(encoding="utf-8")
    s.stamps = stamps(out)
    (blocked / "model").unlink()
    # Second attempt, killed (with its worker) once the blocked run has saved its first checkpoint.
    command = [sys.executable, "-m", "adlnmt", "experiment", *args]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not any(blocked.glob("model/states/*.state.pt")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    s.killed_trained = (blocked / "trained.json").exists()
    s.final_status, s.final_stdout = experiment(*args, "--jobs", "2")
    s.final_stamps = stamps(out)
    return s


def test_a_failed_run_is_reported_and_the_others_finish(sequence: SimpleNamespace) -> None:
    assert sequence.first_status == 1
    assert re.search(r"FAILED \[\d/4\] b seed 2 \(exit status 2\)", sequence.first_stdout)
    assert "1 run(s) failed: b seed 2" in sequence.first_stdout
    assert [(row["variant"], row["seeds_finished"]) for row in sequence.first_csv] == [("a", "2"), ("b", "1")]
    assert "- b seed 2: failed or interrupted; log" in sequence.first_report
    b_row = next(line for line in sequence.first_table.splitlines() if line.startswith("| b |"))
    assert "| 1/2 |" in b_row and "±" not in b_row.split("|")[4]  # one seed: the mean alone


def test_a_killed_run_resumes_and_finished_runs_are_not_trained_again(sequence: SimpleNamespace) -> None:
    assert not sequence.killed_trained, "the kill should land during training"
    assert sequence.final_status == 0
    assert "3 finished (skipped), 1 to run" in sequence.final_stdout
    assert sequence.final_stamps == sequence.stamps
    for variant, seed in (("a", 1), ("a", 2), ("b", 1)):
        assert (run_dir(sequence.out, variant, seed) / "log.txt").read_text().count("\n=== ") == 1
    log = (sequence.blocked / "log.txt").read_text()
    assert log.count("\n=== ") == 3 and "resuming at update" in log
    result = json.loads((sequence.blocked / "result.json").read_text())
    assert result["updates"] == 40
    sessions = result["provenance"]["training_sessions"]  # failed, killed, resumed: each with its code version
    assert len(sessions) == 3 and all({"started", "git_commit", "git_dirty"} <= session.keys() for session in sessions)
    for variant, seed in (("a", 1), ("a", 2), ("b", 1)):
        result = json.loads((run_dir(sequence.out, variant, seed) / "result.json").read_text())
        assert len(result["provenance"]["training_sessions"]) == 1


def test_each_run_decoded_alone_and_no_handshake_is_left(sequence: SimpleNamespace) -> None:
    for variant, seed in (("a", 1), ("a", 2), ("b", 1), BLOCKED):
        directory = run_dir(sequence.out, variant, seed)
        result = json.loads((directory / "result.json").read_text())
        assert result["provenance"]["paused_minutes"] >= 0
        assert not list(directory.glob("decoding.*"))


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="pip install 'adlnmt[tensorboard]'")
def test_tensorboard_on_the_output_folder_finds_one_run_per_grid_row(sequence: SimpleNamespace) -> None:
    from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer

    runs = (
        EventMultiplexer().AddRunsFromDirectory(str(sequence.out)).Reload().Runs()
    )  # what `tensorboard --logdir` does
    assert sorted(runs) == [f"runs/{v}/seed-{s}/model/tensorboard" for v in ("a", "b") for s in (1, 2)]
    assert all("valid/perplexity" in tags["tensors"] for tags in runs.values())  # scalars, as the plugins read them


def test_every_run_is_scored_on_the_contrastive_suite_and_the_report_has_it(sequence: SimpleNamespace) -> None:
    items = len((sequence.out.parent / "agreement.jsonl").read_text(encoding="utf-8").splitlines())
    for variant, seed in (("a", 1), ("a", 2), ("b", 1), BLOCKED):
        scored = json.loads((run_dir(sequence.out, variant, seed) / "result.json").read_text())["contrastive"]
        assert (
            len(scored["agreement"]["correct"]) == items > 20 and 0 <= scored["agreement"]["overall"]["accuracy"] <= 1
        )
    report = (sequence.out / "report.md").read_text(encoding="utf-8")
    assert "## Contrastive evaluation" in report and "| a | 2 | " in report
    assert (sequence.out / "plots" / "contrastive-agreement.png").is_file()


def test_the_table_is_the_mean_and_sample_std_of_the_runs(sequence: SimpleNamespace) -> None:
    rows = read_csv(sequence.out / "results.csv")
    finished = [(row["variant"], row["seeds_finished"], row["seeds_total"]) for row in rows]
    assert finished == [("a", "2", "2"), ("b", "2", "2")]
    for row in rows:
        results = [json.loads((run_dir(sequence.out, row["variant"], seed) / "result.json").read_text())
                   for seed in (1, 2)]  # fmt: skip
        assert int(row["parameters"]) == results[0]["parameters"] > 0
        for metric in ("bleu", "chrf"):
            values = [r["tests"]["test"]["scores"][metric] for r in results]
            assert float(row[f"test.{metric}.mean"]) == pytest.approx(statistics.fmean(values), rel=1e-5)
            assert float(row[f"test.{metric}.std"]) == pytest.approx(statistics.stdev(values), rel=1e-5, abs=1e-9)
        assert float(row["updates.mean"]) == statistics.fmean(r["updates"] for r in results)
        assert float(row["test.sentences_per_s.mean"]) > 0
    assert rows[0]["test.bleu.p"] == ""  # the baseline is not tested against itself
    assert 0 < float(rows[1]["test.bleu.p"]) <= 1
    lines = [line for line in (sequence.out / "results.md").read_text().splitlines() if line.startswith("|")]
    assert len(lines) == 4 and len({line.count("|") for line in lines}) == 1
    assert lines[0].startswith("| variant | seeds | params | BLEU | chrF | paper: WMT BLEU | valid ppl |")
    assert lines[2].startswith("| a (baseline) | 2/2 |") and " ± " in lines[2] and "| 27.6 |" in lines[2]
    assert lines[3].split("|")[6].strip() == "–"  # b has no published score
    assert [row["paper.WMT BLEU"] for row in rows] == ["27.6", ""]
    assert lines[2] in sequence.final_stdout  # the table is printed at the end
    assert len(read_csv(sequence.out / "runs.csv")) == 4


def test_plots_and_the_report(sequence: SimpleNamespace) -> None:
    report = (sequence.out / "report.md").read_text()
    for name in ("curves.png", "length-test.png", "speed-test.png"):
        assert (sequence.out / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(plots/{name})" in report
    assert "## Against a: two-level bootstrap" in report and "Unfinished" not in report
    lengths = report.split("## Output length")[1].split("\n## ")[0]
    length_rows = [line for line in lengths.splitlines() if line.startswith(("| a |", "| b |"))]
    assert len(length_rows) == 2 and all("(BP " in line for line in length_rows)
    section = report.split("## Convergence")[1].split("\n## ")[0]
    convergence = [line for line in section.splitlines() if line.startswith("| a |")]
    # 6 updates, a validation every 3, patience 16: the cap ends the runs, converged only on a plateau
    assert len(convergence) == 2 and all("| 6 | update cap |" in line for line in convergence)
    result = json.loads((run_dir(sequence.out, "a", 1) / "result.json").read_text())
    buckets = result["tests"]["test"]["buckets"]
    assert [b["label"] for b in buckets] == ["1-5", "6-8", "9+"]
    assert sum(b["sentences"] for b in buckets) == result["tests"]["test"]["sentences"] == 60
    assert all(b["ms_per_sentence"] > 0 for b in buckets if b["sentences"])
    assert result["tests"]["test"]["busy_beside"] == 0.0  # the counters of quiet_machine never move
    assert [r["update"] for r in result["curve"]] == [3, 6]


def test_report_only_and_dry_run_change_no_run(sequence: SimpleNamespace) -> None:
    status, stdout = experiment(*sequence.args, "--report-only")
    assert status == 0 and "| b | 2/2 |" in stdout
    status, stdout = experiment(*sequence.args, "--dry-run")
    assert status == 0 and "seed 1 finished, seed 2 finished" in stdout and "selected:" not in stdout
    status, stdout = experiment(*sequence.args, "--dry-run", "--rerun", "--variants", "a", "--seeds", "1")
    assert status == 0 and "selected: 1 of 4 runs" in stdout and "--rerun: 1 finished run(s) trained again" in stdout
    assert "seed 1 finished, trained again (--rerun), seed 2 finished (not selected)" in stdout, stdout
    assert "seed 1 finished (not selected), seed 2 finished (not selected)" in stdout  # b
    assert stamps(sequence.out) == sequence.stamps  # a dry run deletes nothing, with --rerun too


def test_rerun_before_trains_again_only_the_runs_evaluated_before_its_date(
    sequence: SimpleNamespace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--rerun-before DATE``: the same command run again (a lane started again next session) trains none twice."""
    out = tmp_path / "out"
    shutil.copytree(sequence.out, out)
    args = (sequence.args[0], "--out", str(out), "--dry-run", "--variants", "a")
    status, stdout = experiment(*args, "--rerun-before", "2000-01-01T00:00")
    assert status == 0 and "trained again" not in stdout  # every run evaluated since
    result_path = run_dir(out, "a", 2) / "result.json"
    result = json.loads(result_path.read_text())
    result["provenance"]["machine"]["date"] = "2020-01-01T08:00:00+00:00"  # as if a lost teacher had taught it
    result_path.write_text(json.dumps(result), encoding="utf-8")
    status, stdout = experiment(*args, "--rerun-before", "2021-01-01T05:00Z")
    assert status == 0 and "--rerun-before 2021-01-01T05:00Z: 1 finished run(s) trained again" in stdout, stdout
    assert "seed 1 finished, seed 2 finished, trained again (--rerun-before 2021-01-01T05:00Z)" in stdout  # seed 1
    assert "--rerun:" not in stdout  # evaluated after the date; the option given is named, not --rerun
    for flags, message in ((("--rerun-before", "yesterday"), "not an ISO 8601 date and time"),
                           (("--rerun-before", "2999-01-01"), "in the future"),
                           (("--rerun", "--rerun-before", "2021-01-01"), "give one of them"),
                           (("--retime", "--rerun-before", "2021-01-01"), "and --retime: give")):  # fmt: skip
        assert main(["experiment", *args[:-2], *flags]) == 2
        assert message in capsys.readouterr().err


def test_a_run_started_with_other_training_settings_is_refused_with_the_way_out(
    sequence: SimpleNamespace, tmp_path: Path
) -> None:
    """A grid whose training settings changed under a run that had started (its model in its folder, no result):
    the trainer would refuse it with advice for `adlnmt train`; the grid says which settings and how to go on."""
    out = tmp_path / "out"
    shutil.copytree(sequence.out, out)
    (run_dir(out, "a", 1) / "result.json").unlink()  # started, not finished
    spec = (run_dir(out, "a", 1) / "run.json").read_text()
    grid = yaml.safe_load(Path(sequence.args[0]).read_text(encoding="utf-8"))
    grid["variants"][0]["train"] = {"lr": 1e-3, "warmup": 7}
    changed = tmp_path / "grid.yaml"
    changed.write_text(yaml.safe_dump(grid), encoding="utf-8")
    status, stdout = experiment(str(changed), "--out", str(out), "--dry-run")
    assert status == 0 and "seed 1 started with other settings (lr, warmup): not run; --rerun trains it" in stdout
    status, stdout = experiment(str(changed), "--out", str(out), "--variants", "a", "--seeds", "1", "--threads", "1")
    assert status == 1 and re.search(
        r"FAILED a seed 1: not run: .*seed-1 holds a model trained with other settings "
        r"\(lr, warmup\) than the grid gives this run now; put them back",
        stdout,
    ), stdout
    assert (run_dir(out, "a", 1) / "run.json").read_text() == spec  # as the model was trained
    status, stdout = experiment(sequence.args[0], "--out", str(out), "--dry-run")  # the settings put back
    assert "a [runs/a, data default]: seed 1 started (resumes at update" in stdout, stdout


def test_retime_measures_the_speed_again_and_keeps_the_first_timing(sequence: SimpleNamespace, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(sequence.out, out)
    args = (sequence.args[0], "--out", str(out), "--threads", "1", "--retime")
    result_path = run_dir(out, "a", 1) / "result.json"
    first = json.loads(result_path.read_text())
    hyp = run_dir(out, "b", 2) / "hyp" / "test.txt"
    hyp.write_text(hyp.read_text().replace("\n", " x\n", 1))  # not what these weights translate
    shutil.rmtree(run_dir(out, "b", 1) / "model")
    spec = json.loads((run_dir(out, "a", 1) / "run.json").read_text())  # as after a test set was added to the grid
    spec["tests"].append({**spec["tests"][0], "name": "added"})
    (run_dir(out, "a", 1) / "run.json").write_text(json.dumps(spec))
    status, stdout = experiment(*args, "--seeds", "1", "--dry-run")  # what it would time, training nothing
    assert status == 0 and re.search(r"  a \[runs/a, .*\]: seed 1 finished[^,]*, timed again \(--retime\), seed 2 "
                                     r"finished[^,]* \(not selected\)", stdout), stdout  # fmt: skip
    status, stdout = experiment(*args)
    assert status == 0, stdout
    assert re.search(r"retimed a seed 1: sentences/s test [\d.]+ → [\d.]+ on .+ \(\w+\)", stdout), stdout
    assert "skipped b seed 1: its model is not on this machine" in stdout
    assert "skipped b seed 2: its test translation differs from the archived one" in stdout
    assert "--retime: 2 timing(s) not taken in full or not alone (the lines above say why)" in stdout, stdout
    again = json.loads(result_path.read_text())
    assert again["retimed"]["before"]["tests"]["test"]["sentences_per_s"] == first["tests"]["test"]["sentences_per_s"]
    assert again["tests"]["test"]["scores"] == first["tests"]["test"]["scores"]
    assert again["retimed"]["before"]["machine"] == first["provenance"]["machine"] and "git_commit" in again["retimed"]
    assert "Speeds measured again after training (`--retime`" in (out / "results.md").read_text()
    status, stdout = experiment(*args, "--variants", "a", "--seeds", "1")  # a second retime keeps the first timing
    assert RETIMED_IN_FULL in stdout.splitlines()  # the line a lane's --retime line looks for
    assert json.loads(result_path.read_text())["retimed"]["before"] == again["retimed"]["before"]
    kept = result_path.read_text()
    with pytest.MonkeyPatch.context() as patch:  # other processes busy: the timing is not taken
        patch.setattr(BusyBeside, "cores", lambda self: 1.5)
        status, stdout = experiment(*args, "--variants", "a", "--seeds", "1")
    assert "skipped a seed 1: other processes kept 1.5 cores busy while its test was timed" in stdout
    assert RETIMED_IN_FULL not in stdout and "--retime: 1 timing(s) not taken in full or not alone" in stdout
    assert status == 0 and result_path.read_text() == kept
    assert experiment(*args, "--rerun")[0] == 2  # a user error: --retime trains nothing


def test_score_added_scores_finished_runs_on_what_the_grid_added_after_them(
    sequence: SimpleNamespace, tmp_path: Path
) -> None:
    out, results = tmp_path / "out", tmp_path / "results"
    shutil.copytree(sequence.out, out)
    tiny = yaml.safe_load(Path(sequence.args[0]).read_text(encoding="utf-8"))
    tiny["added_evaluation"] = {
        "since": "2026-11-29",
        "test": [{**tiny["test"][0], "name": "again"}],
        "metrics": ["ter"],
    }
    grid = Path(sequence.args[0]).with_name("added.yaml")  # beside the grid: the same relative paths, fingerprints
    grid.write_text(yaml.safe_dump(tiny), encoding="utf-8")
    args = (str(grid), "--out", str(out), "--results", str(results), "--threads", "1", "--score-added")
    assert experiment(*args, "--rerun")[0] == 2 and experiment(*args, "--retime")[0] == 2  # user errors
    hyp = run_dir(out, "b", 2) / "hyp" / "test.txt"
    hyp.write_text(hyp.read_text().replace("\n", " x\n", 1))  # not what these weights translate
    shutil.rmtree(run_dir(out, "b", 1) / "model")
    before = json.loads((run_dir(out, "a", 1) / "result.json").read_text())
    status, stdout = experiment(*args)
    assert status == 0, stdout
    assert re.search(r"scored a seed 1 later: ter on test \(from its archived hypotheses\); again \(bleu [\d.]+, "
                     r"chrf [\d.]+, ter [\d.]+\)\n", stdout), stdout  # fmt: skip
    assert "scored b seed 1 later: ter on test (from its archived hypotheses); not translated: its model is not on " \
        "this machine" in stdout  # fmt: skip
    assert "not translated: its weights here translate test otherwise than its archived hypotheses" in stdout
    for place in (run_dir(out, "a", 1), run_dir(results, "a", 1)):  # the run directory and the archive
        after = json.loads((place / "result.json").read_text())
        assert after["fingerprint"] == before["fingerprint"] and after["provenance"] == before["provenance"]
        test, again = after["tests"]["test"], after["tests"]["again"]
        assert test["scores"] == {**before["tests"]["test"]["scores"], "ter": again["scores"]["ter"]}
        assert again["scores"]["bleu"] == test["scores"]["bleu"]  # the same sentences, translated as archived
        assert (place / "hyp/again.txt").read_bytes() == (place / "hyp/test.txt").read_bytes()
        assert all("ter" in bucket["scores"] for bucket in test["buckets"] if bucket["sentences"])
        (later,) = after["scored_later"]
        assert (later["tests"], later["metrics"], later["checked_on"]) == (["again"], ["ter"], "test")
    b2 = json.loads((run_dir(results, "b", 2) / "result.json").read_text())
    assert "again" not in b2["tests"] and "ter" in b2["tests"]["test"]["scores"]
    runs = {(row["variant"], row["seed"]): row for row in read_csv(results / "runs.csv")}
    assert runs["a", "1"]["again.bleu"] and not runs["b", "1"]["again.bleu"] and runs["b", "1"]["test.ter"]
    table = (results / "results.md").read_text()
    assert "a seed 1 (again, checked on test; ter from its hypotheses); a seed 2 (" in table
    kept = (run_dir(results, "a", 1) / "result.json").read_text()
    status, stdout = experiment(*args)  # nothing left to add where it could be
    assert "a seed 1: scored on every test set and metric of the grid already" in stdout
    assert "skipped b seed 1: its model is not on this machine" in stdout
    assert (run_dir(results, "a", 1) / "result.json").read_text() == kept


def test_claims_are_judged_from_the_runs(sequence: SimpleNamespace) -> None:
    lines = [line for line in (sequence.out / "claims.md").read_text().splitlines() if line.startswith("| “")]
    assert len(lines) == 3
    assert lines[0].startswith("| “a beats b” (§1) | a > b | bleu test | 1, 2 |")
    assert "| b ≥ a − 100 |" in lines[1] and "(90 %)" in lines[1]  # 100 BLEU of margin
    assert "| b ≥ 1e+100 × a | sent/s test | 1, 2 |" in lines[2]
    judged = json.loads((sequence.out / "claims.json").read_text())
    assert [c["measured"] for c in judged["claims"]][1:] == ["holds", "does not hold"]
    for record in judged["claims"]:  # 6-update runs stopped by their cap: a claim on them is not decided
        assert record["verdict"] == ("inconclusive: not converged" if record["unconverged"] else record["measured"])
    assert all(c["seeds"] == [[1, 2], [1, 2]] and c["planned_seeds"] == 2 for c in judged["claims"])
    assert "claims: " in sequence.final_stdout


def test_a_fresh_clone_skips_the_archived_runs_and_rebuilds_the_report(
    sequence: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory
) -> None:
    grid = Path(sequence.args[0])
    archive = grid.parent / "results" / "tiny"  # the default archive of this grid (no scale)
    status, _ = experiment(*sequence.args, "--results", str(archive), "--report-only")  # archives finished runs
    assert status == 0 and len(list(archive.glob("runs/*/seed-*/result.json"))) == 4
    assert not list(archive.rglob("*.safetensors")) and (archive / "runs/a/seed-1/hyp/test.txt").is_file()
    clone = tmp_path_factory.mktemp("clone")  # as deep as the original: the corpus is at the same relative path
    shutil.copyfile(grid, clone / "grid.yaml")
    shutil.copytree(archive, clone / "results" / "tiny")
    status, stdout = experiment(str(clone / "grid.yaml"), "--report-only")
    assert status == 0 and "| b | 2/2 |" in stdout
    for name in ("results.md", "report.md", "claims.md", "claims.json"):  # a rebuild changes nothing
        assert (clone / "results/tiny" / name).read_text() == (archive / name).read_text(), name
    status, stdout = experiment(str(clone / "grid.yaml"), "--dry-run")
    assert stdout.count("finished (archived)") == 4
    status, stdout = experiment(str(clone / "grid.yaml"), "--threads", "1")
    assert status == 0 and "4 finished (skipped), 0 to run" in stdout and not (clone / "runs" / "runs").exists()
    before = (clone / "results/tiny/runs/a/seed-1/result.json").stat().st_mtime_ns
    status, stdout = experiment(
        str(clone / "grid.yaml"), "--threads", "1", "--rerun", "--variants", "a", "--seeds", "1"
    )
    assert status == 0 and "1 runs, 0 finished (skipped), 1 to run" in stdout
    assert (clone / "results/tiny/runs/a/seed-1/result.json").stat().st_mtime_ns > before
    # trained again on the same machine and threads: the same run, and the replaced archive is not left behind
    assert "a seed 1 trained again: reproduced: the same weights (SHA-256), the same 2 checkpoints" in stdout, stdout
    assert "will likely not reproduce" not in stdout  # the same processor
    assert not list(clone.rglob("replaced"))
    result = json.loads((clone / "results/tiny/runs/a/seed-1/result.json").read_text())
    rerun = result["rerun"]  # what it replaced, and the comparison
    assert rerun["reproduced"] and rerun["comparison"].startswith("reproduced: the same weights")
    assert rerun["replaced_weights_digest"] == result["provenance"]["weights_digest"]  # the same tensors, in files
    assert rerun["replaced_weights_sha256"] != result["provenance"]["weights_sha256"]  # that name their own models
    archived, replaced = clone / "results/tiny/runs/a/seed-1", clone / "runs/tiny/runs/a/seed-1/replaced"
    shutil.copytree(archived / "hyp", replaced / "hyp")  # a rerun finished, not compared (a SLURM job, no --wait) ...
    shutil.copyfile(archived / "result.json", replaced / "result.json")
    status, stdout = experiment(str(clone / "grid.yaml"), "--report-only")  # ... is compared by the next command
    assert status == 0 and "a seed 1 trained again: reproduced: the same weights" in stdout, stdout
    assert not replaced.exists()


def test_a_run_another_grid_archived_with_the_same_settings_is_copied_not_trained(
    sequence: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("shared")  # as deep as the original: the corpus is at the same relative path
    tiny = yaml.safe_load(Path(sequence.args[0]).read_text(encoding="utf-8"))
    archived = root / "results" / "tiny" / "runs" / "a" / "seed-1"
    shutil.copytree(run_dir(sequence.out, "a", 1) / "hyp", archived / "hyp")
    shutil.copyfile(run_dir(sequence.out, "a", 1) / "result.json", archived / "result.json")
    a, b = tiny["variants"]
    other = {**tiny, "name": "other", "seeds": [1], "variants": [{**a, "name": "baseline"}, {**b, "name": "c"}]}
    for key in ("claims", "baseline"):
        del other[key]
    grid = root / "other.yaml"
    grid.write_text(yaml.safe_dump(other), encoding="utf-8")
    status, stdout = experiment(str(grid), "--dry-run", "--rerun")  # retrained on purpose: not copied
    assert status == 0 and "baseline [runs/baseline, data default]: seed 1 new" in stdout
    pending = root / "results/other/runs/baseline/seed-1/replaced"  # a rerun of it, stopped before it finished
    pending.mkdir(parents=True)
    shutil.copyfile(archived / "result.json", pending / "result.json")
    status, stdout = experiment(str(grid), "--dry-run")
    assert (
        status == 0
        and "baseline [runs/baseline, data default]: seed 1 to be trained again here (its replaced result kept)"
        in stdout
    )  # resumes as a rerun: not copied, not new
    shutil.rmtree(pending)  # ... or being trained again in another output folder: neither copied nor trained here
    (pending.parent / RERUN_MARK).write_text(f"{root / 'work/runs/baseline/seed-1'}\n", encoding="utf-8")
    status, stdout = experiment(str(grid), "--dry-run")
    assert f"seed 1 trained again in {root / 'work/runs/baseline/seed-1'} (not here)" in stdout, stdout
    status, stdout = experiment(str(grid), "--variants", "baseline", "--seeds", "1")
    assert (
        status == 0
        and "baseline seed 1: being trained again in" in stdout
        and "1 runs, 0 finished (skipped), 0 to run" in stdout
    ), stdout
    shutil.rmtree(root / "results/other")
    status, stdout = experiment(str(grid), "--dry-run")
    assert "baseline [runs/baseline, data default]: seed 1 finished as tiny/runs/a/seed-1 (shared)" in stdout
    assert "c [runs/c, data default]: seed 1 new" in stdout
    status, stdout = experiment(str(grid), "--report-only")
    assert status == 0 and "baseline seed 1: finished as tiny/runs/a/seed-1 (the same settings), copied" in stdout
    copied = json.loads((root / "results/other/runs/baseline/seed-1/result.json").read_text())
    original = json.loads((archived / "result.json").read_text())
    assert copied == {**original, "shared_from": "tiny/runs/a/seed-1"}
    assert (root / "results/other/runs/baseline/seed-1/hyp/test.txt").read_bytes() == (
        run_dir(sequence.out, "a", 1) / "hyp/test.txt").read_bytes()  # fmt: skip
    report = (root / "results/other/report.md").read_text()
    assert "1/2 runs finished" in report and "trained once for another grid with the same settings: baseline seed 1" \
        in report  # fmt: skip
    assert not (root / "results/other/runs/c").exists()
    (root / "tiny.yaml").write_text(yaml.safe_dump(tiny), encoding="utf-8")  # the same grid: a rerun, not shared
    status, stdout = experiment(str(root / "tiny.yaml"), "--results", str(root / "results/again"), "--dry-run")
    assert status == 0 and "a [runs/a, data default]: seed 1 new, seed 2 new" in stdout


def test_without_a_finished_run_no_report_is_written(demo_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    blocked = run_dir(out, *BLOCKED)
    blocked.mkdir(parents=True)
    (blocked / "model").write_text("not a directory")
    grid = grid_file(tmp_path, demo_data / "corpus")
    status, stdout = experiment(str(grid), "--out", str(out), "--threads", "1", "--variants", "b", "--seeds", "2")
    assert status == 1 and f"no finished run yet, so no report in {out}" in stdout
    kept = ("grid.yaml", "experiment.lock", ".gitignore")
    assert not [p for p in out.iterdir() if p.is_file() and p.name not in kept]  # no report.md, results.md, ...


@pytest.mark.parametrize("flag, value", [("--variants", ""), ("--seeds", ""), ("--variants", "a,"), ("--seeds", " ")])
def test_an_empty_selection_is_an_error_never_every_run(
    flag: str, value: str, demo_data: Path, tmp_path: Path, capsys
) -> None:
    """Issue 69 point 2: ``--rerun --variants ""`` (an unset shell variable) meant every run: all deleted."""
    grid = grid_file(tmp_path, demo_data / "corpus")
    status, stdout = experiment(str(grid), "--out", str(tmp_path / "out"), "--dry-run", "--rerun", flag, value)
    assert status == 2 and stdout == ""
    item = "name" if flag == "--variants" else "seed"
    assert f"{flag} {value!r}: an empty {item} in the list" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--variants", "a,b,a", "variant a"), ("--seeds", "1,1", "seed 1"), ("--seeds", "2, 1,02", "seed 2")],
)
def test_a_repeated_selection_is_an_error(
    flag: str, value: str, message: str, demo_data: Path, tmp_path: Path, capsys
) -> None:
    """``--seeds 1,1`` (another seed meant?) ran seed 1 once, saying nothing."""
    grid = grid_file(tmp_path, demo_data / "corpus")
    status, stdout = experiment(str(grid), "--out", str(tmp_path / "out"), "--dry-run", flag, value)
    assert status == 2 and stdout == ""
    assert f"error: {flag} {value!r}: {message} given more than once" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--power", "--dry-run"), "--power and --dry-run: give one of them at a time"),
        (("--report-only", "--status"), "--status and --report-only: give one of them at a time"),
        (("--power", "--rerun"), "--power prints a power table and changes no run: it does not go with --rerun"),
        (
            ("--status", "--retime"),
            "--status shows the runs' SLURM jobs and changes no run: it does not go with --retime",
        ),
        (("--score-added", "--rerun"), "--rerun and --score-added: give one of them at a time"),
    ],
)
def test_one_mode_at_a_time(flags: tuple[str, ...], message: str, demo_data: Path, tmp_path: Path, capsys) -> None:
    """Two flags of which the command would follow one and ignore the other are refused (--power --rerun printed the
    power table and trained nothing again, saying nothing)."""
    grid = grid_file(tmp_path, demo_data / "corpus")
    status, stdout = experiment(str(grid), "--out", str(tmp_path / "out"), *flags)
    assert status == 2 and stdout == ""
    assert f"error: {message}" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [("--rerun",), ("--rerun-before", "2021-01-01")])
def test_report_only_refuses_a_rerun_it_would_ignore(flags: tuple[str, ...], demo_data: Path, tmp_path: Path,
                                                      capsys) -> None:  # fmt: skip
    """``--report-only --rerun`` rebuilt the report and trained nothing again, exit status 0, saying nothing."""
    grid = grid_file(tmp_path, demo_data / "corpus")
    status, stdout = experiment(str(grid), "--out", str(tmp_path / "out"), "--report-only", *flags)
    assert status == 2 and stdout == ""
    assert "--report-only rebuilds the report and changes no run: it does not go with --rerun" in (
        capsys.readouterr().err
    )
