"""A grid's distillation step: the ``distill:`` section and ``distilled: true`` variants (validation, data keys,
fingerprints), the local executor's order (teacher, distillation, students) end to end on the demo corpus, and the
SLURM executor's job dependencies (with a recording stand-in for submitit)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest
import yaml

from adlnmt.cli import main
from adlnmt.data.data_dir import DataDir
from adlnmt.errors import UserError
from adlnmt.experiment import distill_runs, slurm
from adlnmt.experiment.grid import load_grid
from adlnmt.experiment.results import Rerun, RunResult
from adlnmt.experiment.runner import plan_runs

TINY = {"d_model": 32, "heads": 4, "batch_tokens": 600, "max_updates": 6, "checkpoint_interval": 3, "lr": 2e-3,
        "valid_bleu": False}  # fmt: skip
ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODER = "pos -> repeat(1, res_nd({x}) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"


def grid_dict(corpus: Path, **changes: Any) -> dict[str, Any]:
    grid = {
        "name": "kd",
        "data": {"train_src": str(corpus / "train.src"), "train_tgt": str(corpus / "train.tgt"),
                 "valid_src": str(corpus / "valid.src"), "valid_tgt": str(corpus / "valid.tgt"), "vocab_size": 150},
        "test": [{"name": "test", "src": str(corpus / "test.src"), "ref": str(corpus / "test.tgt")}],
        "metrics": ["bleu"],
        "seeds": [1],
        "baseline": "teacher",
        "bootstrap_resamples": 50,
        "translate": {"beam": 2},
        "train": TINY,
        "distill": {"teacher": "teacher", "seed": 1, "beam": 2, "chunk_size": 500},
        "variants": [
            {"name": "teacher", "encoder": ENCODER, "decoder": DECODER.format(x="mh_dot_self_att")},
            {"name": "student", "encoder": ENCODER, "decoder": DECODER.format(x="ssru"), "distilled": True},
            {"name": "student on refs", "encoder": ENCODER, "decoder": DECODER.format(x="ssru")},
        ],
    }  # fmt: skip
    grid.update(changes)
    return grid


def write_grid(root: Path, grid: dict[str, Any], name: str = "grid.yaml") -> Path:
    path = root / name
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


def test_students_train_on_the_teachers_data(demo_data: Path, tmp_path: Path) -> None:
    grid = load_grid(write_grid(tmp_path, grid_dict(demo_data / "corpus")))
    student, teacher, plain = grid.variant("student"), grid.variant("teacher"), grid.variant("student on refs")
    assert grid.distill is not None and grid.distill.key == "distilled-teacher-seed-1"
    assert student.data.key == "distilled-teacher-seed-1" and student.data.distill == grid.distill
    assert student.data.arguments() == teacher.data.arguments() and plain.data == teacher.data
    assert grid.distill.options().beam == 2 and grid.distill.checkpoint == "best"


def fingerprints(corpus: Path, root: Path, **changes: Any) -> dict[str, str]:
    root.mkdir(exist_ok=True)
    grid = load_grid(write_grid(root, grid_dict(corpus, **changes)))
    return {run.variant.name: run.fingerprint for run in plan_runs(grid, root / "out")}


def test_a_students_fingerprint_covers_its_teacher_and_the_step(demo_data: Path, tmp_path: Path) -> None:
    corpus = demo_data / "corpus"
    base = fingerprints(corpus, tmp_path / "a")
    assert base == fingerprints(corpus, tmp_path / "b")  # not where the grid lies
    beam = fingerprints(corpus, tmp_path / "c", distill={"teacher": "teacher", "seed": 1, "beam": 3, "chunk_size": 500})
    assert beam["student"] != base["student"] and beam["teacher"] == base["teacher"]
    variants = grid_dict(corpus)["variants"]
    variants[0]["train"] = {"lr": 1e-3}  # another teacher
    other = fingerprints(corpus, tmp_path / "d", variants=variants)
    assert other["student"] != base["student"] and other["student on refs"] == base["student on refs"]


NO_STUDENT = [{"name": name, "encoder": ENCODER, "decoder": DECODER.format(x=x)}
              for name, x in (("teacher", "mh_dot_self_att"), ("student", "ssru"))]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"distill": {"teacher": "teachr"}}, r"distill.teacher: unknown variant 'teachr' \(did you mean 'teacher'"),
        ({"distill": {"teacher": "teacher", "seed": 7}}, r"distill.seed: 7 is not one of the grid's seeds \[1\]"),
        ({"distill": {"teacher": "teacher", "beam": 0}}, r"distill.beam: must be >= 1, got 0"),
        (
            {"distill": {"teacher": "teacher", "beam": 500}},
            r"distill.beam: a beam of 500 is wider than the target "
            r"vocabulary of 'teacher' \(150 pieces\)",
        ),
        (
            {"translate": {"beam": 151}},
            r"translate.beam: a beam of 151 is wider than the target vocabulary of 'teacher'",
        ),
        ({"distill": {"teacher": "teacher", "checkpoint": "worst"}}, r"distill.checkpoint: expected one of best"),
        (
            {"distill": {"teacher": "teacher", "checkpoint": None}},
            r"distill.checkpoint: expected one of .*, got nothing",
        ),
        (
            {"distill": {"teacher": "teacher", "checkpoint": "averaged"}},
            r"distill.checkpoint: 'averaged' is the checkpoint translate.average writes, and this grid has no "
            r"translate.average \(at this scale\)",
        ),
        ({"distill": {"teacher": "teacher", "temperature": 2}}, r"distill.temperature: unknown key; expected one of"),
        ({"distill": None}, r"'student'.*distilled: a distilled variant needs the grid's 'distill' section"),
        (
            {"variants": NO_STUDENT},
            r"distill: no variant is marked 'distilled: true', so its teacher would teach no one",
        ),
    ],
)
def test_a_bad_step_is_one_clear_error(demo_data: Path, tmp_path: Path, change: dict, message: str) -> None:
    grid = grid_dict(demo_data / "corpus", **change)
    if grid["distill"] is None:
        del grid["distill"]
    with pytest.raises(UserError, match=message):
        load_grid(write_grid(tmp_path, grid))


def test_a_teacher_that_is_a_student_or_a_student_with_own_data_is_refused(demo_data: Path, tmp_path: Path) -> None:
    grid = grid_dict(demo_data / "corpus")
    grid["variants"][0]["distilled"] = True
    with pytest.raises(UserError, match="the teacher trains on the references"):
        load_grid(write_grid(tmp_path, grid))
    grid = grid_dict(demo_data / "corpus")
    grid["variants"][1]["data"] = {"vocab_size": 100}
    with pytest.raises(UserError, match="its own 'data' options would change it"):
        load_grid(write_grid(tmp_path, grid))
    grid = grid_dict(demo_data / "corpus", scales={"tiny": {"variants": ["student", "student on refs"]}})
    grid["baseline"] = "student"
    with pytest.raises(UserError, match=r"scales.tiny.variants: keep the teacher 'teacher': student learn from it"):
        load_grid(write_grid(tmp_path, grid), "tiny")


def experiment(*argv: str) -> tuple[int, str]:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        status = main(["experiment", *argv])
    return status, output.getvalue()


def test_the_local_executor_runs_teacher_distillation_students(demo_data: Path, tmp_path: Path) -> None:
    path = write_grid(tmp_path, grid_dict(demo_data / "corpus"))
    out = tmp_path / "out"
    state = "distillation distilled-teacher-seed-1: distilled once its teacher teacher seed 1 has finished"
    assert state in experiment(str(path), "--out", str(out), "--dry-run")[1]
    plan = experiment(str(path), "--out", str(out), "--dry-run", "--variants", "student")[1]
    assert "the others are left alone, but for 1 teacher(s) of selected students, trained first" in plan
    assert "teacher [runs/teacher, data default]: seed 1 new (not selected, but trained first: the selected " in plan
    assert "student on refs [runs/student-on-refs, data default]: seed 1 new (not selected)" in plan
    status, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student")
    assert status == 0, stdout
    assert "1 runs, 0 finished (skipped), 1 to run and 1 teacher(s) of them first (not selected) (0 resumed" in stdout
    state = f"distillation distilled-teacher-seed-1: complete in {out / 'data' / 'distilled-teacher-seed-1'}"
    assert state in experiment(str(path), "--out", str(out), "--dry-run")[1]
    teacher_result = out / "runs" / "teacher" / "seed-1" / "result.json"
    distilled = out / "data" / "distilled-teacher-seed-1"
    student_result = out / "runs" / "student" / "seed-1" / "result.json"
    assert teacher_result.is_file() and student_result.is_file()  # the teacher was added: the student needs it
    assert not (out / "runs" / "student-on-refs").exists()
    record = DataDir.load(distilled).manifest["distilled"]
    assert record["teacher"]["members"][0]["model"] == str((out / "runs" / "teacher" / "seed-1" / "model").resolve())
    assert record["search"]["beam"] == 2 and record["chunk_size"] == 500
    assert teacher_result.stat().st_mtime_ns < (distilled / "manifest.json").stat().st_mtime_ns
    assert (distilled / "manifest.json").stat().st_mtime_ns < student_result.stat().st_mtime_ns
    train = yaml.safe_load((out / "runs" / "student" / "seed-1" / "train.yaml").read_text())
    assert Path(train["data"]) == distilled
    assert stdout.index("done   distillation") < stdout.index("start  student seed 1")
    again, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student")
    assert again == 0 and "0 to run" in stdout and "distil " not in stdout
    step = {**grid_dict(demo_data)["distill"], "beam": 3}
    other = write_grid(tmp_path, grid_dict(demo_data / "corpus", distill=step), "other.yaml")
    why = f"{distilled} holds a distillation made with other distill: settings (beam) than the grid's now"
    assert f"distillation distilled-teacher-seed-1: cannot be made: {why}" in experiment(str(other), "--out", str(out),
                                                                                         "--dry-run")[1]  # fmt: skip
    status, stdout = experiment(str(other), "--out", str(out), "--threads", "1", "--variants", "student")
    assert status == 1 and "FAILED student seed 1: not run: " in stdout  # it trained on the other distillation
    assert "(its data or the model it starts from)" in stdout
    status, stdout = experiment(str(other), "--out", str(out), "--threads", "1", "--variants", "student", "--rerun")
    assert status == 1 and f"FAILED student seed 1: not run, {why}; put them back, or delete" in stdout, stdout
    assert DataDir.load(distilled).manifest["distilled"]["search"]["beam"] == 2  # left as it was


def test_a_student_records_its_distillation_and_a_second_one_must_train_on_the_same(
    demo_data: Path, tmp_path: Path
) -> None:
    """A teacher trained again (a fresh machine) may translate differently: a student on those translations is
    refused while another student of the grid trained on the first ones, so a row never mixes two distillations."""
    path = write_grid(tmp_path, grid_dict(demo_data / "corpus", seeds=[1, 2]))
    out = tmp_path / "out"
    status, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student", "--seeds", "1")
    assert status == 0, stdout
    teacher = json.loads((out / "runs" / "teacher" / "seed-1" / "result.json").read_text())["provenance"]
    student = json.loads((out / "runs" / "student" / "seed-1" / "result.json").read_text())["provenance"]
    distilled = out / "data" / "distilled-teacher-seed-1"
    record = DataDir.load(distilled).manifest["distilled"]
    assert student["distillation"]["teacher_sha256"] == [record["teacher"]["members"][0]["weights_sha256"]]
    assert teacher["weights_sha256"] == record["teacher"]["members"][0]["weights_sha256"]  # its best checkpoint
    assert "distillation" not in teacher  # trained on references
    manifest = json.loads((distilled / "manifest.json").read_text())
    for name in manifest["distilled"]["train_tgt_sha256"]:  # other translations of the same sentences
        manifest["distilled"]["train_tgt_sha256"][name] = "0" * 64
    (distilled / "manifest.json").write_text(json.dumps(manifest))
    status, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student", "--seeds", "2")
    assert status == 1 and "FAILED [1/1] student seed 2" in stdout, stdout
    assert "not those that student seed 1, a finished student of the same teacher, trained on" in stdout
    assert not (out / "runs" / "student" / "seed-2" / "model").exists()  # refused before training


def test_a_teacher_trained_again_that_did_not_reproduce_does_not_teach_beside_students_that_recorded_nothing(
    demo_data: Path, tmp_path: Path
) -> None:
    """Students finished before students recorded their translations (2026-11-29) cannot be told from another
    teacher's: a teacher trained again without reproducing its result (on another processor) makes no distillation
    while they stand, saying what to do; trained again themselves, they learn from it."""
    path = write_grid(tmp_path, grid_dict(demo_data / "corpus", seeds=[1, 2]))
    out = tmp_path / "out"
    status, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student", "--seeds", "1")
    assert status == 0, stdout
    student = out / "runs" / "student" / "seed-1" / "result.json"
    legacy = RunResult.load(student)
    replace(legacy, provenance=replace(legacy.provenance, distillation=None)).save(student)  # as before 2026-11-29
    teacher = out / "runs" / "teacher" / "seed-1" / "result.json"
    result = RunResult.load(teacher)
    rerun = Rerun(replaced_machine=replace(result.provenance.machine, cpu="AMD EPYC"),
                  replaced_code=result.provenance.code, replaced_weights_sha256="0" * 64, reproduced=False,
                  same_hypotheses=True, comparison="not reproduced: other weights (SHA-256)")  # fmt: skip
    replace(result, rerun=rerun).save(teacher)
    shutil.rmtree(out / "data" / "distilled-teacher-seed-1")  # the distillation lost, and not archived
    shutil.rmtree(out / "distilled")
    why = ("its teacher teacher seed 1 was trained again and did not reproduce the result it replaced (not "
           "reproduced: other weights (SHA-256)), and 1 student run(s) finished on the first distillation, which they "
           "did not record (student seed 1): a row would mix students of two distillations. Train those again on "
           "this teacher (--rerun --variants 'student' --seeds 1), or train the teacher again where it reproduces "
           "(the processor it was evaluated on: AMD EPYC (")  # fmt: skip
    assert f"distillation distilled-teacher-seed-1: cannot be made: {why}" in experiment(
        str(path), "--out", str(out), "--dry-run")[1]  # fmt: skip
    status, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student", "--seeds", "2")
    assert status == 1 and f"FAILED student seed 2: not run, {why}" in stdout, stdout
    assert not (out / "data" / "distilled-teacher-seed-1").exists()
    translates = replace(rerun, reproduced=True, same_hypotheses=False, comparison="reproduced: …")  # search changed
    replace(result, rerun=translates).save(teacher)
    stdout = experiment(str(path), "--out", str(out), "--dry-run")[1]
    assert "was trained again and reproduced its training but translates differently now" in stdout, stdout
    commit = (result.provenance.code.git_commit or "?")[:7]
    assert f"distil it with code that translates as before (its replaced result: commit {commit})" in stdout
    replace(result, rerun=replace(rerun, reproduced=True)).save(teacher)  # the same weights and translations
    assert "distilled by" in experiment(str(path), "--out", str(out), "--dry-run")[1]
    replace(result, rerun=rerun).save(teacher)
    args = (str(path), "--out", str(out), "--variants", "student", "--seeds", "1", "--rerun")
    stdout = experiment(*args, "--dry-run")[1]
    assert "distillation distilled-teacher-seed-1: distilled by" in stdout, stdout  # as --rerun then does
    status, stdout = experiment(*args, "--threads", "1")
    assert status == 0 and "done   distillation distilled-teacher-seed-1" in stdout, stdout
    assert RunResult.load(student).provenance.distillation is not None


def test_a_fresh_machine_restores_the_archived_distillation_without_a_teacher(
    demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The distillation is archived beside the runs (targets' ids and provenance, no source); a machine with neither
    the distilled data nor the teacher's weights makes the data again from there, and its students train on the same
    translations; an archive whose targets are not those it records is refused, saying which."""
    path = write_grid(tmp_path, grid_dict(demo_data / "corpus", seeds=[1, 2]))
    out = tmp_path / "out"
    status, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student", "--seeds", "1")
    assert status == 0 and "distillation distilled-teacher-seed-1 archived in" in stdout, stdout
    folder = out / "distilled" / "distilled-teacher-seed-1"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.*")) == [
        "record.json",
        "targets/000000.npy",
    ]
    distilled = out / "data" / "distilled-teacher-seed-1"
    record = DataDir.load(distilled).manifest["distilled"]
    shutil.rmtree(distilled)  # a fresh clone: no distilled data, no teacher weights
    shutil.rmtree(out / "runs" / "teacher" / "seed-1" / "model")
    status, stdout = experiment(str(path), "--out", str(out), "--dry-run")
    assert f"distillation distilled-teacher-seed-1: restored from {folder} (no teacher needed)" in stdout, stdout
    status, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student", "--seeds", "2")
    assert status == 0 and f"distillation distilled-teacher-seed-1 restored from {folder}" in stdout, stdout
    assert "archived in" not in stdout  # the archive holds this one already
    assert DataDir.load(distilled).manifest["distilled"] == record
    first, second = (json.loads((out / "runs" / "student" / f"seed-{n}" / "result.json").read_text()) for n in (1, 2))
    assert first["provenance"]["distillation"] == second["provenance"]["distillation"]
    shutil.rmtree(distilled)
    targets = np.load(folder / "targets" / "000000.npy")
    targets[-1] = (targets[-1] + 1) % 150  # one target piece changed
    np.save(folder / "targets" / "000000.npy", targets)
    capsys.readouterr()
    status, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student", "--rerun")
    error = capsys.readouterr().err
    assert status == 2 and f"{folder}: its targets are not the translations its record names" in error
    assert not distilled.exists()


def test_a_teacher_without_weights_leaves_its_students_not_run(demo_data: Path, tmp_path: Path) -> None:
    path = write_grid(tmp_path, grid_dict(demo_data / "corpus"))
    out = tmp_path / "out"
    assert experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "teacher")[0] == 0
    (out / "runs" / "teacher" / "seed-1" / "model" / "best.safetensors").unlink()
    status, stdout = experiment(str(path), "--out", str(out), "--dry-run")
    assert "distillation distilled-teacher-seed-1: cannot be made: the best weights of its teacher" in stdout
    status, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student")
    assert status == 1
    assert "FAILED student seed 1: not run, the best weights of its teacher teacher seed 1 are not in" in stdout
    assert "--rerun --variants 'teacher' --seeds 1" in stdout and "will likely not reproduce" not in stdout
    assert not (out / "data" / "distilled-teacher-seed-1").exists()
    teacher = out / "runs" / "teacher" / "seed-1" / "result.json"  # evaluated on another processor than this one
    result = RunResult.load(teacher)
    replace(result, provenance=replace(result.provenance, machine=replace(result.provenance.machine, cpu="Other CPU"))
            ).save(teacher)  # fmt: skip
    stdout = experiment(str(path), "--out", str(out), "--dry-run")[1]
    assert (f"--seeds 1 (it was evaluated on Other CPU ({result.provenance.machine.cpu_capability}), this machine is "
            f"{result.provenance.machine.processor}: trained here it will likely not reproduce, so its finished "
            "students may need training again)") in stdout  # fmt: skip


def test_complete_distilled_data_needs_no_teacher_weights(demo_data: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The grid's data carried to another machine (a lent GPU) without the teacher's weights: the students train on
    it, locally or as SLURM jobs without a distillation job; data distilled with other settings still needs them."""
    path = write_grid(tmp_path, grid_dict(demo_data / "corpus"))
    out = tmp_path / "out"
    assert experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student")[0] == 0
    (out / "runs" / "teacher" / "seed-1" / "model" / "best.safetensors").unlink()
    FakeExecutor.submitted = []
    monkeypatch.setattr(slurm, "_executor", lambda folder, options, name: FakeExecutor(options, name))
    grid = load_grid(path)
    runs = plan_runs(grid, out)
    students = [run for run in runs if run.variant.name == "student"]
    data_dirs = {key: out / "data" / key for key in ("default", "distilled-teacher-seed-1")}
    distill_runs.submit(grid, students, runs, out, data_dirs, [].append, slurm.SlurmOptions(), 1, "cpu")
    (student,) = FakeExecutor.submitted
    assert student["what"] == "student" and "dependency" not in student["sbatch"]
    status, stdout = experiment(str(path), "--out", str(out), "--threads", "1", "--variants", "student", "--rerun")
    assert status == 0, stdout
    assert "done   distillation distilled-teacher-seed-1 (complete; its teacher's weights are not needed)" in stdout
    assert (out / "runs" / "student" / "seed-1" / "result.json").is_file()
    other = write_grid(tmp_path, grid_dict(demo_data / "corpus", distill={"teacher": "teacher", "seed": 1, "beam": 3,
                                                                          "chunk_size": 500}))  # fmt: skip
    status, stdout = experiment(str(other), "--out", str(out), "--threads", "1", "--variants", "student")
    assert status == 1 and "(its data or the model it starts from) than the grid gives" in stdout  # the other data
    status, stdout = experiment(str(other), "--out", str(out), "--threads", "1", "--variants", "student", "--rerun")
    assert status == 1 and "FAILED student seed 1: not run, the best weights of its teacher" in stdout


def test_a_teacher_copied_from_another_grid_teaches_with_that_runs_weights(demo_data: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    other = grid_dict(demo_data / "corpus", name="other", variants=grid_dict(demo_data / "corpus")["variants"][:1])
    del other["distill"]
    other_path = write_grid(tmp_path, other, "other.yaml")  # beside the grid: the same data paths in the fingerprints
    assert experiment(str(other_path), "--out", str(results / "other"), "--threads", "1")[0] == 0
    path = write_grid(tmp_path, grid_dict(demo_data / "corpus"))
    status, stdout = experiment(str(path), "--out", str(results / "kd"), "--threads", "1", "--variants", "student")
    assert status == 0, stdout
    assert "teacher seed 1: finished as other/runs/teacher/seed-1 (the same settings)" in stdout
    assert not (results / "kd" / "runs" / "teacher" / "seed-1" / "model").exists()  # not trained again
    record = DataDir.load(results / "kd" / "data" / "distilled-teacher-seed-1").manifest["distilled"]
    assert record["teacher"]["members"][0]["model"] == str((results / "other" / "runs" / "teacher" / "seed-1" /
                                                            "model").resolve())  # fmt: skip
    assert (results / "kd" / "runs" / "student" / "seed-1" / "result.json").is_file()


class FakeExecutor:
    """submitit's SlurmExecutor as distill_runs and slurm use it, recording each submission's dependency."""

    submitted: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, options: slurm.SlurmOptions, name: str) -> None:
        self.options, self.name = options, name

    def _job(self, what: str) -> SimpleNamespace:
        job = SimpleNamespace(job_id=str(100 + len(self.submitted)))
        self.submitted.append({"what": what, "name": self.name, "sbatch": dict(self.options.sbatch),
                               "job_id": job.job_id})  # fmt: skip
        return job

    def map_array(self, function: Any, arguments: list[str]) -> list[SimpleNamespace]:
        return [self._job(Path(argument).parent.name) for argument in arguments]

    def submit(self, function: Any, command: list[str]) -> SimpleNamespace:
        assert command[command.index("--beam") + 1] == "2"
        return self._job("distill")


def test_slurm_jobs_wait_for_the_teacher_and_the_distillation(
    demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeExecutor.submitted = []
    monkeypatch.setattr(slurm, "_executor", lambda folder, options, name: FakeExecutor(options, name))
    monkeypatch.setattr(slurm, "job_states", lambda records: {})
    grid = load_grid(write_grid(tmp_path, grid_dict(demo_data / "corpus")))
    runs = plan_runs(grid, tmp_path / "out")
    data_dirs = {"default": tmp_path / "out" / "data" / "default",
                 "distilled-teacher-seed-1": tmp_path / "out" / "data" / "distilled-teacher-seed-1"}  # fmt: skip
    written = []
    students = [run for run in runs if run.variant.name == "student"]
    on_slurm = distill_runs.submit(grid, students, runs, tmp_path / "out", data_dirs, written.append,
                                   slurm.SlurmOptions(), 1, "cpu")  # fmt: skip
    assert [run.variant.name for run in written] == ["teacher"]  # its spec written: it runs first
    teacher, step, student = FakeExecutor.submitted
    assert teacher["what"] == "teacher" and "dependency" not in teacher["sbatch"]
    assert step["what"] == "distill" and step["sbatch"]["dependency"] == f"afterok:{teacher['job_id']}"
    assert student["what"] == "student" and student["sbatch"]["dependency"] == f"afterok:{step['job_id']}"
    assert student["sbatch"]["kill-on-invalid-dep"] == "yes"
    assert {run.variant.name for run in on_slurm} == {"teacher", "student"}
    record = json.loads((tmp_path / "out" / "data" / "distilled-teacher-seed-1.slurm.json").read_text())
    assert record["job_id"] == step["job_id"]


# stands in for `adlnmt distill`: records its pid, then whether a SIGTERM reached it
FAKE_DISTILL = """
import os, pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: (marker.write_text("stopped"), sys.exit(143)))
marker.write_text(str(os.getpid()))
time.sleep(120)
"""
# the grid's distillation step in a process of its own, which the test stops
STEP = """
import sys
from pathlib import Path
from types import SimpleNamespace
from adlnmt.experiment import distill_runs
marker, fake = Path(sys.argv[1]), sys.argv[2]
distill_runs.distilled_by = lambda *_: False
distill_runs.teacher_model = lambda *_: Path("teacher")
distill_runs.command = lambda *_: [sys.executable, fake, str(marker)]
teacher = SimpleNamespace(label="teacher seed 1", variant=SimpleNamespace(data=SimpleNamespace(key="default")))
dirs = {"distilled": marker.parent / "distilled", "default": marker.parent / "default"}
print(distill_runs.distil_locally(SimpleNamespace(key="distilled"), teacher, [], dirs, "cpu", 1, print), flush=True)
"""


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_grid_stops_its_distillation_which_never_outlives_it(tmp_path: Path, stop: int) -> None:
    """SIGTERM is passed on and the step says it was stopped (the grid then reports, and resumes it when run
    again); the distillation never goes on as an orphan (SIGKILL of the grid: Linux's parent-death signal), so a
    second command could never distil into the same directory beside it."""
    fake, marker = tmp_path / "fake.py", tmp_path / "marker"
    fake.write_text(FAKE_DISTILL)
    step = subprocess.Popen([sys.executable, "-c", STEP, str(marker), str(fake)], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60  # bounds a hang only
    while not (marker.exists() and marker.read_text().isdigit()):
        assert time.monotonic() < deadline and step.poll() is None
        time.sleep(0.05)
    child = int(marker.read_text())
    step.send_signal(stop)
    out, _ = step.communicate(timeout=60)
    while marker.read_text() != "stopped":
        assert time.monotonic() < deadline + 60
        time.sleep(0.05)
    if stop == signal.SIGTERM:
        assert step.returncode == 0 and out.splitlines()[-1] == distill_runs.STOPPED_BY_SIGNAL, out
    while running(child):  # gone: reaped by its parent, or a zombie once orphaned
        assert time.monotonic() < deadline + 60
        time.sleep(0.05)


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False
