"""Training end to end on the demo corpus: checkpoints, metrics, early stop, NaN handling, exact resume."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.speedups import speedups_off
from adlnmt.train.trainer import TrainingError

from .conftest import TINY_MODEL


def train_args(data: Path, model: Path, *extra: str) -> list[str]:
    return ["train", "--data", str(data), "--model", str(model), *TINY_MODEL, *extra]


def records(model: Path) -> list[dict]:
    path = model / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_training_writes_checkpoints_and_the_loss_goes_down(demo_data: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    argv = train_args(demo_data / "data", model, "--max-updates", "60", "--checkpoint-interval", "20",
                      "--keep-last", "2", "--lr", "2e-3")  # fmt: skip
    assert main(argv) == 0
    log = records(model)
    assert [r["update"] for r in log] == [20, 40, 60]
    assert log[-1]["train_loss"] < log[0]["train_loss"]
    assert log[-1]["valid_ppl"] < log[0]["valid_ppl"]
    assert all(0 <= r["valid_bleu"] <= 100 for r in log)
    assert sorted(p.name for p in (model / "checkpoints").iterdir()) == [
        "update-0000040.safetensors", "update-0000060.safetensors"]  # fmt: skip
    stored = json.loads((model / "config.json").read_text())
    assert stored["canonical"]["encoder"].startswith("pos -> repeat(2, res_nd(mh_dot_self_att)")
    assert (model / "best.safetensors").is_file()
    # Translating with the trained model gives one line per input line, empty lines kept empty.
    source = tmp_path / "in.txt"
    source.write_text("\n".join([*(demo_data / "corpus" / "test.src").read_text().splitlines()[:3], "", "x"]) + "\n")
    assert main(["translate", "--model", str(model), "--input", str(source), "--output", str(tmp_path / "o")]) == 0
    outputs = (tmp_path / "o").read_text().split("\n")
    assert len(outputs) == 6 and outputs[3] == "" and outputs[5] == ""


def test_bf16_autocast_trains_on_the_cpu(demo_data: Path, tmp_path: Path, capsys) -> None:
    common = ["--max-updates", "20", "--checkpoint-interval", "10", "--lr", "2e-3", "--no-valid-bleu"]
    assert main(train_args(demo_data / "data", tmp_path / "fp32", *common)) == 0
    assert main(train_args(demo_data / "data", tmp_path / "bf16", *common, "--precision", "bf16")) == 0
    fp32, bf16 = records(tmp_path / "fp32"), records(tmp_path / "bf16")
    assert bf16[-1]["train_loss"] < bf16[0]["train_loss"]
    assert bf16[-1]["train_loss"] != fp32[-1]["train_loss"]  # autocast did run in bf16 ...
    assert bf16[-1]["valid_ppl"] == pytest.approx(fp32[-1]["valid_ppl"], rel=0.1)  # ... and learnt as much
    assert main(train_args(demo_data / "data", tmp_path / "fp16", *common, "--precision", "fp16")) == 2
    assert "--precision fp16 needs a CUDA device" in capsys.readouterr().err


# an input-feeding decoder runs the step protocol in training too, its output projected once afterwards
INPUT_FEEDING = ["--encoder", "dropout -> birnn -> res_d(rnn)", "--input-feeding",
                 "--decoder", "dropout -> rnn -> res_d(rnn) -> concat(id, mlp_src_att) -> ff"]  # fmt: skip


@pytest.mark.parametrize("model", [[], INPUT_FEEDING], ids=["transformer", "input-feeding"])
def test_the_fused_loss_trains_like_the_unfused_one(demo_data: Path, tmp_path: Path, model: list[str]) -> None:
    common = ["--max-updates", "10", "--checkpoint-interval", "5", "--lr", "2e-3", "--no-valid-bleu", *model]
    assert main(train_args(demo_data / "data", tmp_path / "fused", *common)) == 0
    with speedups_off("fused_loss"):
        assert main(train_args(demo_data / "data", tmp_path / "plain", *common)) == 0
    fused, plain = records(tmp_path / "fused"), records(tmp_path / "plain")
    for a, b in zip(fused, plain, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4)
        assert a["valid_ppl"] == pytest.approx(b["valid_ppl"], rel=1e-4)


def test_a_checkpoint_at_the_end_of_an_epoch_records_that_epoch(demo_data: Path, tmp_path: Path) -> None:
    """--max-epochs 1 recorded "epoch": 2 (the epoch counter had moved on), which serve's /model and a grid's result
    reported as the epochs trained."""
    argv = train_args(demo_data / "data", tmp_path / "m", "--max-epochs", "1", "--no-valid-bleu")
    assert main(argv) == 0
    assert [r["epoch"] for r in records(tmp_path / "m")] == [1]


def test_rerunning_a_finished_run_trains_nothing_more(demo_data: Path, tmp_path: Path) -> None:
    argv = train_args(demo_data / "data", tmp_path / "m", "--max-updates", "10", "--checkpoint-interval", "10",
                      "--no-valid-bleu")  # fmt: skip
    main(argv)
    main(argv)
    assert [r["update"] for r in records(tmp_path / "m")] == [10]


def test_a_refused_start_leaves_no_model_directory_behind(demo_data: Path, tmp_path: Path, capsys) -> None:
    """A run refused before it starts (its ADL, its data: e.g. a distillation not finished yet) leaves no model
    directory it made, only the lock file, behind; a directory that was there before stays."""
    unfinished = tmp_path / "data-kd"
    unfinished.mkdir()  # what an interrupted `adlnmt distill` leaves: no manifest yet
    ssru_encoder = ["--encoder", "pos -> repeat(1, res_nd(ssru) -> res_nd(ffl)) -> norm"]
    for data, extra in ((demo_data / "data", ssru_encoder), (unfinished, []), (tmp_path / "missing", [])):
        assert main(train_args(data, tmp_path / "student", *extra, "--max-updates", "2")) == 2
        assert not (tmp_path / "student").exists(), data
    assert "'ssru' cannot be used in the encoder" in capsys.readouterr().err
    (tmp_path / "mine").mkdir()
    assert main(train_args(unfinished, tmp_path / "mine", "--max-updates", "2")) == 2
    assert (tmp_path / "mine").is_dir()


def test_a_file_given_as_the_model_directory_is_named(demo_data: Path, tmp_path: Path, capsys) -> None:
    """--model a file said "error: FILE: File exists" (mkdir's error)."""
    (tmp_path / "notes.txt").write_text("mine\n")
    assert main(train_args(demo_data / "data", tmp_path / "notes.txt", "--max-updates", "2")) == 2
    error = f"error: {tmp_path / 'notes.txt'}: a file, where the model directory should be; choose another path\n"
    assert capsys.readouterr().err == error
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_a_file_in_the_model_directorys_path_is_named(demo_data: Path, tmp_path: Path, capsys) -> None:
    """--model notes.txt/m said "error: notes.txt/m: Not a directory" (mkdir's error)."""
    (tmp_path / "notes.txt").write_text("mine\n")
    assert main(train_args(demo_data / "data", tmp_path / "notes.txt" / "m", "--max-updates", "2")) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'notes.txt' / 'm'}: cannot create the model directory: a file where a folder of its "
        "path should be; choose another path\n"
    )
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_a_folder_that_is_no_model_directory_is_refused(demo_data: Path, tmp_path: Path, capsys) -> None:
    """--model naming a non-empty folder without config.json (the data folder itself, say) was trained into: its
    config.json, vocab/, checkpoints/ and train.lock written among the folder's own files."""
    data = tmp_path / "data"
    shutil.copytree(demo_data / "data", data)
    before = sorted(p.name for p in data.iterdir())
    assert main(train_args(data, data, "--max-updates", "1", "--no-valid-bleu")) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {data}: not empty and not a model directory (no config.json; it holds ")
    assert err.endswith("--model needs a new or empty folder, or a model directory to resume\n")
    assert sorted(p.name for p in data.iterdir()) == before
    (tmp_path / "empty").mkdir()
    assert main(train_args(data, tmp_path / "empty", "--max-updates", "1", "--no-valid-bleu")) == 0
    (tmp_path / "empty" / "config.json").unlink()  # a run killed before its config.json: its own files only
    shutil.rmtree(tmp_path / "empty" / "checkpoints")
    shutil.rmtree(tmp_path / "empty" / "states")
    (tmp_path / "empty" / "best.safetensors").unlink()
    (tmp_path / "empty" / "metrics.jsonl").unlink()
    assert main(train_args(data, tmp_path / "empty", "--max-updates", "1", "--no-valid-bleu")) == 0


def test_a_different_run_in_the_same_directory_is_refused(demo_data: Path, tmp_path: Path) -> None:
    main(train_args(demo_data / "data", tmp_path / "m", "--max-updates", "5", "--no-valid-bleu"))
    with pytest.raises(UserError, match=r"different settings .*lr"):
        from adlnmt.train.config import TrainConfig
        from adlnmt.train.trainer import Trainer

        Trainer(TrainConfig(data=str(demo_data / "data"), model=str(tmp_path / "m"), encoder="pos", decoder="x",
                            lr=1.0).resolved())  # fmt: skip


def test_patience_stops_training(demo_data: Path, tmp_path: Path) -> None:
    model = tmp_path / "m"
    main(train_args(demo_data / "data", model, "--lr", "0", "--max-updates", "100", "--checkpoint-interval", "5",
                    "--patience", "2", "--no-valid-bleu"))  # fmt: skip
    assert [r["update"] for r in records(model)] == [5, 10, 15]  # best at 5, then two without improvement


def test_a_resume_that_meets_a_stopping_criterion_trains_nothing(demo_data: Path, tmp_path: Path, capsys) -> None:
    """The same command again after early stopping trained another checkpoint interval (and again at every rerun),
    a lower --max-minutes one more update and checkpoint, and a lower --max-updates said "reached 5 updates" at 15."""
    model = tmp_path / "m"
    argv = train_args(demo_data / "data", model, "--lr", "0", "--max-updates", "100", "--checkpoint-interval", "5",
                      "--patience", "2", "--no-valid-bleu")  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 0
    assert "training stopped: no improvement for 2 checkpoints" in capsys.readouterr().err
    assert main([*argv, "--patience", "0", "--max-minutes", "1e-9"]) == 0
    assert "training stopped: reached 1e-09 minutes" in capsys.readouterr().err
    assert main([*argv, "--max-updates", "5"]) == 0
    assert "training stopped: already at update 15, past --max-updates 5" in capsys.readouterr().err
    assert [r["update"] for r in records(model)] == [5, 10, 15]
    assert sorted(p.name for p in (model / "states").iterdir())[-1] == "update-0000015.state.pt"


def test_a_model_is_named_once_and_its_weights_carry_the_name(demo_data: Path, tmp_path: Path, capsys) -> None:
    """config.json's model_id is made with the model, kept by a resume and written into every weights file; another
    model's weights given as --checkpoint are refused (they fit: same sizes, same vocabulary)."""
    from safetensors import safe_open

    def named(path: Path) -> str:
        with safe_open(str(path), framework="pt") as handle:
            return handle.metadata()["adlnmt_model_id"]

    common = ["--checkpoint-interval", "1", "--no-valid-bleu"]
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(train_args(demo_data / "data", first, "--max-updates", "1", *common)) == 0
    model_id = json.loads((first / "config.json").read_text())["model_id"]
    assert main(train_args(demo_data / "data", first, "--max-updates", "2", *common)) == 0  # resumed
    assert json.loads((first / "config.json").read_text())["model_id"] == model_id
    weights = [first / "best.safetensors", *sorted((first / "checkpoints").iterdir())]
    assert len(weights) == 3 and {named(path) for path in weights} == {model_id}
    assert main(train_args(demo_data / "data", second, "--max-updates", "1", *common)) == 0
    assert named(second / "best.safetensors") not in ("", model_id)
    source = tmp_path / "in.de"
    source.write_text("ein Hund\n", encoding="utf-8")
    capsys.readouterr()
    translate = ["translate", "--model", str(first), "--input", str(source), "--output", str(tmp_path / "out")]
    assert main([*translate, "--checkpoint", str(second / "best.safetensors")]) != 0
    assert "the weights of another model" in capsys.readouterr().err
    assert main([*translate, "--checkpoint", str(first / "checkpoints" / "update-0000001.safetensors")]) == 0


def test_non_finite_loss_is_reported_with_the_update(demo_data: Path, tmp_path: Path, monkeypatch) -> None:
    from adlnmt.model import Seq2Seq

    original = Seq2Seq.forward

    def poisoned(self, src, tgt_in, **options):
        return original(self, src, tgt_in, **options) * float("nan")

    monkeypatch.setattr(Seq2Seq, "forward", poisoned)
    with pytest.raises(TrainingError, match="update 1: non-finite loss"):
        main_raising(train_args(demo_data / "data", tmp_path / "a", "--max-updates", "3", "--on-nan", "stop"))
    assert main(train_args(demo_data / "data", tmp_path / "b", "--max-updates", "3", "--no-valid-bleu")) == 0


@pytest.mark.parametrize("measured", [True, False], ids=["norm-clipped", "norm-unused"])
def test_a_non_finite_update_is_skipped_and_training_goes_on(demo_data: Path, tmp_path: Path, monkeypatch,
                                                             measured: bool) -> None:  # fmt: skip
    from adlnmt.model import Seq2Seq

    original, calls = Seq2Seq.forward, []

    def poisoned_once(self, src, tgt_in, **options):  # the training forward of update 2 only
        if self.training:
            calls.append(1)
        out = original(self, src, tgt_in, **options)
        return out * float("nan") if self.training and len(calls) == 2 else out

    monkeypatch.setattr(Seq2Seq, "forward", poisoned_once)
    model = tmp_path / "m"
    norm = [] if measured else ["--clip-norm", "0", "--log-interval", "0"]
    assert main(train_args(demo_data / "data", model, "--max-updates", "4", "--checkpoint-interval", "1",
                           "--no-valid-bleu", *norm)) == 0  # fmt: skip
    state = torch.load(model / "states" / "update-0000004.state.pt", weights_only=True)
    assert state["progress"]["skipped_updates"] == 1
    weights = {u: load_file(model / "checkpoints" / f"update-{u:07d}.safetensors") for u in (1, 2, 3)}
    assert all(torch.equal(weights[1][k], weights[2][k]) for k in weights[1])  # update 2 changed nothing
    assert not all(torch.equal(weights[2][k], weights[3][k]) for k in weights[2])  # update 3 trained again
    # checkpoints 3 and 4 each average their own update's loss: finite again after the skip (NaN losses are left out,
    # so a window of NaN updates alone reads 0)
    assert all(r["train_loss"] > 0 for r in records(model)[2:])


def main_raising(argv: list[str]) -> None:
    from adlnmt.cli import build_parser

    args = build_parser().parse_args(argv)
    args.func(args)


def test_kill_9_then_resume_equals_an_uninterrupted_run(demo_data: Path, tmp_path: Path) -> None:
    common = ["--checkpoint-interval", "10", "--no-valid-bleu", "--lr", "1e-3"]
    killed = tmp_path / "killed"
    command = [sys.executable, "-m", "adlnmt", *train_args(demo_data / "data", killed, "--max-updates", "100000",
                                                            *common)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(records(killed)) < 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, process.stderr.read().decode()
    done = records(killed)[-1]["update"]
    assert done >= 20
    end = done + 20  # however far it got before the kill landed (a loaded machine), two checkpoints more

    assert main(train_args(demo_data / "data", killed, "--max-updates", str(end), *common)) == 0
    assert records(killed)[-1]["update"] == end
    straight = tmp_path / "straight"
    assert main(train_args(demo_data / "data", straight, "--max-updates", str(end), *common)) == 0
    final_straight = load_file(straight / "checkpoints" / f"update-{end:07d}.safetensors")
    final_resumed = load_file(killed / "checkpoints" / f"update-{end:07d}.safetensors")
    assert final_straight.keys() == final_resumed.keys()
    for name in final_straight:
        assert torch.equal(final_straight[name], final_resumed[name]), name
    straight_log = {r["update"]: r["train_loss"] for r in records(straight)}
    resumed_log = {r["update"]: r["train_loss"] for r in records(killed)}
    assert resumed_log[end] == pytest.approx(straight_log[end], rel=1e-6)


def test_a_resumed_window_reports_its_throughput_over_both_sessions(
    demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped at update 19 of a 10-update window: the checkpoint at 20 counts the tokens of updates 11-20, so its
    tokens/s must divide them by the time of updates 11-20, not by the time since the resumption (10x too high)."""
    from adlnmt.train.trainer import Trainer

    common = ["--checkpoint-interval", "10", "--no-valid-bleu", "--max-updates", "20"]
    straight = tmp_path / "straight"
    assert main(train_args(demo_data / "data", straight, *common)) == 0

    def stop_at_19(self: Trainer, signals: object) -> int:
        return signal.SIGTERM if self.progress.update == 19 else 0

    resumed = tmp_path / "resumed"
    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "_stop_signal", stop_at_19)
        main(train_args(demo_data / "data", resumed, *common))
    assert [r["update"] for r in records(resumed)] == [10]
    assert main(train_args(demo_data / "data", resumed, *common)) == 0
    rate, expected = records(resumed)[-1]["tokens_per_s"], records(straight)[-1]["tokens_per_s"]
    assert records(resumed)[-1]["update"] == 20 and expected / 3 < rate < 3 * expected


@pytest.fixture
def recompile_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """torch.compile's recompilations (with their reasons) in ``caplog.records``."""
    torch._logging.set_logs(recompiles=True)
    try:
        yield caplog
    finally:
        torch._logging.set_logs()


def test_compile_trains_through_torch_compile_as_eager_does(
    demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recompile_log: pytest.LogCaptureFixture
) -> None:
    """``--compile`` routes the training forward and backward through torch.compile (here with the aot_eager
    backend, which compiles no kernels, so that the losses must match eager's); the stored model is the eager one."""
    monkeypatch.setattr(torch._dynamo.config, "cache_size_limit", 64)  # every recompilation shows up in the log
    compiled = []
    real_compile = torch.compile

    def aot_eager(module, **options):
        compiled.append(options)
        return real_compile(module, backend="aot_eager", **options)

    monkeypatch.setattr(torch, "compile", aot_eager)
    common = ["--max-updates", "6", "--checkpoint-interval", "3", "--lr", "2e-3", "--no-valid-bleu"]
    assert main(train_args(demo_data / "data", tmp_path / "eager", *common)) == 0
    assert compiled == []
    assert main(train_args(demo_data / "data", tmp_path / "compiled", *common, "--compile")) == 0
    assert compiled == [{"dynamic": True}]
    # the sinusoid tables were filled before: one grown inside the step recompiled it ("...cache' size mismatch")
    recompiles = [r.getMessage() for r in recompile_log.records if r.name.endswith("__recompiles")]
    assert not any("cache" in message for message in recompiles), recompiles
    eager, through_compile = records(tmp_path / "eager"), records(tmp_path / "compiled")
    assert [r["update"] for r in through_compile] == [3, 6]
    for a, b in zip(eager, through_compile, strict=True):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-4)
        assert b["valid_ppl"] == pytest.approx(a["valid_ppl"], rel=1e-4)
    weights = load_file(tmp_path / "compiled" / "best.safetensors")
    assert not any(name.startswith("_orig_mod") for name in weights)
