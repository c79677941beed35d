"""`adlnmt experiment --executor slurm` end to end on a real single-node SLURM (scripts/slurm/start.sh): a tiny grid
of four runs on the demo corpus, one sequence shared by the tests.

1. ``a`` and ``b`` submitted with --wait: ``a`` finishes, ``b`` raises (its model directory is blocked by a file);
2. ``long`` submitted and cancelled with scancel once it has saved a training state;
3. ``c`` submitted to begin in an hour (queued); --status then shows finished, failed, cancelled and queued runs, and a
   second submission of ``c`` finds its queued job instead of submitting another;
4. ``c``'s job cancelled, ``b`` unblocked, the grid submitted again; ``long`` resumes where scancel stopped it and is
   preempted with the warning signal (USR2, as SLURM sends it before the time limit) once it saved a later update:
   it checkpoints, submitit requeues the job, and it resumes from that update; a second invocation with --wait finds
   the jobs, waits for them and builds the report;
5. the same grid run by the local runner, uninterrupted: the same tables, hypotheses and training curves.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from adlnmt.experiment.slurm import RECORD, job_states
from adlnmt.store import ModelDir
from slurm_cluster import slurm_cluster, wait_until  # noqa: F401 (a fixture)

from .test_experiment import DECODER, ENCODER, TINY, experiment, read_csv, run_dir

pytestmark = pytest.mark.slurm

LONG_UPDATES = 90  # long enough that the signals sent after a checkpoint land during its training
TIMED = ("train min", "sent/s", "tok/s", "train_minutes", "sentences_per_s", "tokens_per_s", "decode_seconds")


def grid_file(root: Path, corpus: Path) -> Path:
    grid = {
        "name": "tiny-slurm",
        "data": {"train_src": str(corpus / "train.src"), "train_tgt": str(corpus / "train.tgt"),
                 "valid_src": str(corpus / "valid.src"), "valid_tgt": str(corpus / "valid.tgt"), "vocab_size": 150},
        "test": [{"name": "test", "src": str(corpus / "test.src"), "ref": str(corpus / "test.tgt")}],
        "metrics": ["bleu"],
        "seeds": [1],
        "length_buckets": [5, 8],
        "translate": {"beam": 2},
        "train": {**TINY, "valid_bleu": False},
        "slurm": {"time": "0:30:00", "cpus": 1, "signal_delay": 60},
        "variants": [{"name": name, "encoder": ENCODER, "decoder": DECODER.format(x=layer)}
                     for name, layer in (("a", "mh_dot_self_att"), ("b", "aan"), ("c", "mh_dot_self_att"))]
                    + [{"name": "long", "encoder": ENCODER, "decoder": DECODER.format(x="aan"),
                        "train": {"max_updates": LONG_UPDATES}}],
    }  # fmt: skip
    path = root / "grid.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


def job_of(directory: Path) -> str:
    return json.loads((directory / RECORD).read_text())["job_id"]


def state_of(directory: Path) -> str:
    return job_states([{"job_id": job_of(directory)}]).get(job_of(directory), "")


def last_saved(directory: Path) -> int:
    states = ModelDir(directory / "model").states()
    return states[-1][0] if states else 0


def untimed_table(path: Path) -> list[list[str]]:
    """A Markdown table's rows without its measured-time columns."""
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in path.read_text().splitlines()
            if line.startswith("|")]  # fmt: skip
    keep = [i for i, name in enumerate(rows[0]) if name not in TIMED]
    return [[row[i] for i in keep] for row in rows]


@pytest.fixture(scope="module")
def sequence(slurm_cluster: None, demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:  # noqa: F811
    root = tmp_path_factory.mktemp("slurm")
    grid = grid_file(root, demo_data / "corpus")
    out = root / "out"
    base = (str(grid), "--out", str(out))
    slurm = (*base, "--executor", "slurm")
    s = SimpleNamespace(grid=grid, out=out, **{name: run_dir(out, name, 1) for name in ("a", "b", "c", "long")})
    s.b.mkdir(parents=True)
    (s.b / "model").write_text("not a directory")  # the trainer cannot create its model directory: it raises
    # 1.
    s.first_status, s.first_stdout = experiment(*slurm, "--variants", "a,b", "--wait")
    # 2.
    experiment(*slurm, "--variants", "long")
    s.cancelled_job = job_of(s.long)
    wait_until(lambda: last_saved(s.long) > 0, "long's first training state")
    subprocess.run(["scancel", s.cancelled_job], check=True)
    wait_until(lambda: state_of(s.long) == "CANCELLED", "the cancelled job to end")
    s.saved_when_cancelled = last_saved(s.long)
    # 3.
    experiment(*slurm, "--variants", "c", "--sbatch", "begin=now+3600")
    s.queued_job = job_of(s.c)
    s.status_code, s.status = experiment(*base, "--status")
    s.again_code, s.again = experiment(*slurm, "--variants", "c")
    s.queued_job_after = job_of(s.c)
    # 4.
    subprocess.run(["scancel", s.queued_job], check=True)
    wait_until(lambda: state_of(s.c) == "CANCELLED", "the queued job to be cancelled")
    (s.b / "model").unlink()
    s.resubmit_code, s.resubmit = experiment(*slurm)
    s.preempted_job = job_of(s.long)
    wait_until(lambda: last_saved(s.long) > s.saved_when_cancelled, "long to save an update after resuming")
    subprocess.run(["scancel", "--signal=USR2", s.preempted_job], check=True)
    s.final_code, s.final = experiment(*slurm, "--wait")
    s.job_after_preemption = job_of(s.long)
    # 5.
    s.local = root / "local"
    s.local_code, _ = experiment(str(grid), "--out", str(s.local), "--jobs", "2", "--threads", "1")
    return s


def status_line(status: str, label: str) -> str:
    return next(line.strip() for line in status.splitlines() if line.strip().startswith(f"{label}:"))


def test_a_run_whose_code_raises_shows_as_failed_with_its_error(sequence: SimpleNamespace) -> None:
    assert sequence.first_status == 1
    assert re.search(r"done   \[\d/2\] a seed 1", sequence.first_stdout)
    assert re.search(r"FAILED \[\d/2\] b seed 1: failed \(job \d+_\d: FAILED\); log \S+/b/seed-1/log.txt",
                     sequence.first_stdout), sequence.first_stdout  # fmt: skip
    line = status_line(sequence.status, "b seed 1")
    assert re.fullmatch(rf"b seed 1: failed \(job \d+_\d: FAILED\); log {sequence.b}/log.txt \(job output: \S+\)", line)
    after = sequence.status.split(line, 1)[1].split("\n  c seed 1")[0]
    assert "model" in after and "error" in after.lower()  # the last lines of its log: the error


def test_status_shows_finished_failed_cancelled_and_queued_runs(sequence: SimpleNamespace) -> None:
    assert sequence.status_code == 0
    assert status_line(sequence.status, "a seed 1") == "a seed 1: finished"
    assert status_line(sequence.status, "c seed 1") == f"c seed 1: queued (job {sequence.queued_job})"
    cancelled = status_line(sequence.status, "long seed 1")
    assert cancelled == (f"long seed 1: cancelled (job {sequence.cancelled_job}; saved update "
                         f"{sequence.saved_when_cancelled}: submitting again resumes there)")  # fmt: skip


def test_a_queued_run_is_not_submitted_twice(sequence: SimpleNamespace) -> None:
    assert sequence.again_code == 0
    assert f"c seed 1: queued as job {sequence.queued_job}; not submitted again" in sequence.again
    assert "submitted" not in sequence.again.replace("not submitted again", "")
    assert sequence.queued_job_after == sequence.queued_job


def test_a_cancelled_run_resumes_where_it_stopped(sequence: SimpleNamespace) -> None:
    assert "as SLURM jobs" in sequence.resubmit and "3 to run (1 resumed first)" in sequence.resubmit
    log = (sequence.long / "log.txt").read_text()
    assert f"resuming at update {sequence.saved_when_cancelled} " in log
    assert json.loads((sequence.long / "result.json").read_text())["updates"] == LONG_UPDATES


def test_a_preempted_job_checkpoints_is_requeued_and_resumes_from_its_saved_update(sequence: SimpleNamespace) -> None:
    log = (sequence.long / "log.txt").read_text()
    after_resume = log.split(f"resuming at update {sequence.saved_when_cancelled} ", 1)[1]
    saved = re.search(r"SIGTERM: checkpoint of update (\d+) written", after_resume)
    assert saved, "the warning signal should land during training"
    update = int(saved.group(1))
    assert update > sequence.saved_when_cancelled
    assert f"resuming at update {update} " in after_resume.split(saved.group(0), 1)[1]
    assert sequence.job_after_preemption == sequence.preempted_job  # requeued: the same job, not a new submission
    assert log.count(f"SLURM job {sequence.preempted_job} on") == 2
    job_output = (sequence.out / "slurm" / f"{sequence.preempted_job}_0_log.out").read_text()
    assert f"Requeued job {sequence.preempted_job}" in job_output


def test_the_grid_ends_as_the_local_runner_ends_it(sequence: SimpleNamespace) -> None:
    assert sequence.final_code == 0 and sequence.local_code == 0
    assert "not submitted again" in sequence.final
    for name in ("results.md",):
        assert untimed_table(sequence.out / name) == untimed_table(sequence.local / name)
    timed = [column for column in read_csv(sequence.out / "results.csv")[0] if any(t in column for t in TIMED)]
    assert [{k: v for k, v in row.items() if k not in timed} for row in read_csv(sequence.out / "results.csv")] == [
        {k: v for k, v in row.items() if k not in timed} for row in read_csv(sequence.local / "results.csv")
    ]
    for variant in ("a", "b", "c", "long"):  # the same hypotheses and training curves (loss, perplexity by update)
        cluster, local = (json.loads((run_dir(out, variant, 1) / "result.json").read_text())
                          for out in (sequence.out, sequence.local))  # fmt: skip
        curve_keys = ("update", "epoch", "train_loss", "valid_ppl")
        assert [{k: r[k] for k in curve_keys} for r in cluster["curve"]] == [
            {k: r[k] for k in curve_keys} for r in local["curve"]
        ], variant
        assert (run_dir(sequence.out, variant, 1) / "hyp/test.txt").read_text() == (
            run_dir(sequence.local, variant, 1) / "hyp/test.txt"
        ).read_text()


def test_a_submission_sbatch_refuses_is_one_clear_error(
    sequence: SimpleNamespace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _ = experiment(str(sequence.grid), "--out", str(tmp_path / "out"), "--executor", "slurm",
                           "--variants", "a", "--partition", "no-such-partition")  # fmt: skip
    assert status == 2
    assert "error: sbatch refused the jobs: sbatch: error: invalid partition specified: no-such-partition" in (
        capsys.readouterr().err
    )
    assert not (run_dir(tmp_path / "out", "a", 1) / RECORD).exists()
