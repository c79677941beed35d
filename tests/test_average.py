"""Checkpoint averaging: the elementwise mean, mismatch errors, best/last selection, tied weights, the command."""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from adlnmt import average
from adlnmt.errors import UserError
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.published import DECODERS, ENCODERS
from adlnmt.store import ModelDir, load_weights, weights_digest
from adlnmt.store.atomic import file_sha256
from adlnmt.train import checkpoint as ckpt


def test_average_is_the_elementwise_mean(tmp_path: Path) -> None:
    torch.manual_seed(0)
    first = {"w": torch.randn(3, 4), "h": torch.randn(5).half(), "d": torch.randn(2).double(), "n": torch.tensor([1])}
    second = {"w": torch.randn(3, 4), "h": torch.randn(5).half(), "d": torch.randn(2).double(), "n": torch.tensor([7])}
    save_file(first, str(tmp_path / "a.safetensors"))
    save_file(second, str(tmp_path / "b.safetensors"))
    mean = average.average_checkpoints([tmp_path / "a.safetensors", tmp_path / "b.safetensors"])
    assert {key: value.dtype for key, value in mean.items()} == {key: value.dtype for key, value in first.items()}
    torch.testing.assert_close(mean["w"], (first["w"] + second["w"]) / 2)
    assert torch.equal(mean["h"], ((first["h"].float() + second["h"].float()) / 2).half())  # float32 accumulation
    torch.testing.assert_close(mean["d"], (first["d"] + second["d"]) / 2, rtol=0, atol=1e-15)
    assert torch.equal(mean["n"], second["n"])  # integer tensors: the last file's value
    # a single checkpoint averages to itself, and the inputs are left untouched
    torch.testing.assert_close(average.average_checkpoints([tmp_path / "a.safetensors"])["w"], first["w"])
    torch.testing.assert_close(load_file(str(tmp_path / "a.safetensors"))["w"], first["w"])


def test_mismatched_keys_or_shapes_name_the_file(tmp_path: Path) -> None:
    save_file({"w": torch.zeros(2, 2), "b": torch.zeros(2)}, str(tmp_path / "a.safetensors"))
    save_file({"w": torch.zeros(2, 2)}, str(tmp_path / "keys.safetensors"))
    save_file({"w": torch.zeros(2, 3), "b": torch.zeros(2)}, str(tmp_path / "shape.safetensors"))
    (tmp_path / "bad.safetensors").write_bytes(b"garbage")
    with pytest.raises(UserError, match=r"keys\.safetensors: its tensors differ .*missing \['b'\]"):
        average.average_checkpoints([tmp_path / "a.safetensors", tmp_path / "keys.safetensors"])
    with pytest.raises(UserError, match=r"shape\.safetensors: tensor 'w' has shape \[2, 3\] but \[2, 2\]"):
        average.average_checkpoints([tmp_path / "a.safetensors", tmp_path / "shape.safetensors"])
    with pytest.raises(UserError, match=r"bad\.safetensors: not a readable safetensors"):
        average.average_checkpoints([tmp_path / "a.safetensors", tmp_path / "bad.safetensors"])
    with pytest.raises(UserError, match=r"gone\.safetensors: checkpoint not found"):
        average.average_checkpoints([tmp_path / "gone.safetensors"])


PPL = {100: 3.0, 200: 5.0, 300: 6.0, 400: 4.0, 500: 4.0, 600: 7.0}  # 100 and 200 have been pruned
BLEU = {100: 40.0, 200: 10.0, 300: 20.0, 400: 30.0, 500: 25.0, 600: 35.0}  # the order by BLEU: 600, 400, 500, 300


def model_dir(tmp_path: Path, metric: str = "ppl") -> Path:
    """Checkpoints 300-600 of a model that early-stopped on ``metric``, validated as PPL and BLEU say."""
    config = ModelConfig(ENCODERS["E1"], DECODERS["D1"], 30, 40, d_model=16, heads=4)
    ModelDir(tmp_path).write_config({"train": {"early_stop_metric": metric}, "model": config.to_dict()})
    (tmp_path / "checkpoints").mkdir()
    for update in (300, 400, 500, 600):
        save_file({"w": torch.full((2,), float(update))}, str(ModelDir(tmp_path).weights_path(update)))
    (tmp_path / "checkpoints" / "notes.txt").write_text("not a checkpoint")
    records = [{"update": u, "valid_ppl": p, "valid_bleu": BLEU[u]} for u, p in PPL.items()]
    records.insert(2, {"update": 300, "valid_ppl": 1.0})  # a resumed run logged 300 again: the last record wins
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path


def names(paths: list[Path]) -> list[str]:
    return [path.name for path in paths]


def test_best_and_last_selection(tmp_path: Path) -> None:
    root = model_dir(tmp_path)
    assert names(average.select_checkpoints(root, None, 2)) == [
        "update-0000500.safetensors",
        "update-0000600.safetensors",
    ]
    # 400 and 500 tie at 4.0: the newer (500) ranks first; pruned 100 (ppl 3.0) does not count
    assert names(average.select_checkpoints(root, 1, None)) == ["update-0000500.safetensors"]
    assert names(average.select_checkpoints(root, 3, None)) == [
        "update-0000300.safetensors",
        "update-0000400.safetensors",
        "update-0000500.safetensors",
    ]
    assert len(average.select_checkpoints(root, None, 4)) == 4
    with pytest.raises(UserError, match=r"best 5 checkpoints but .*checkpoints holds 4 .*--keep-last/--keep-best"):
        average.select_checkpoints(root, 5, None)
    with pytest.raises(UserError, match=r"last 5 checkpoints but .*holds 4"):
        average.select_checkpoints(root, None, 5)
    with pytest.raises(UserError, match="exactly one"):
        average.select_checkpoints(root, 1, 1)
    with pytest.raises(UserError, match="exactly one"):
        average.select_checkpoints(root, None, None)


def test_best_follows_the_models_early_stopping_metric(tmp_path: Path) -> None:
    """A model that stopped on validation BLEU kept its best checkpoints by BLEU: --best averages those, not the ones
    with the lowest perplexity (which training may have deleted)."""
    root = model_dir(tmp_path, "bleu")
    assert names(average.select_checkpoints(root, 1, None)) == ["update-0000600.safetensors"]
    assert names(average.select_checkpoints(root, 2, None)) == [
        "update-0000400.safetensors",
        "update-0000600.safetensors",
    ]


def test_best_selection_needs_a_readable_log(tmp_path: Path) -> None:
    root = model_dir(tmp_path)
    with open(root / "metrics.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"update": 700}\n')
    with pytest.raises(UserError, match=r"metrics\.jsonl: the record of update 700 has no valid_ppl"):
        average.select_checkpoints(root, 1, None)
    (root / "metrics.jsonl").unlink()
    with pytest.raises(UserError, match=r"metrics\.jsonl: not found"):
        average.select_checkpoints(root, 1, None)
    (root / "metrics.jsonl").mkdir()  # was 'not found'
    with pytest.raises(UserError, match=r"metrics\.jsonl: a directory, not a file of checkpoint records"):
        average.select_checkpoints(root, 1, None)


def test_a_nan_or_infinite_validation_score_is_never_best(tmp_path: Path) -> None:
    """A diverged run's only record, valid_ppl NaN, made its checkpoint the 'best' one averaged."""
    root = model_dir(tmp_path)
    records = [{"update": 300, "valid_ppl": math.nan}, {"update": 400, "valid_ppl": math.inf}]
    (root / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(UserError, match=r"metrics\.jsonl: no checkpoint has a finite validation score \(updates "
                       r"300, 400: NaN or infinite"):  # fmt: skip
        average.select_checkpoints(root, 1, None)
    with open(root / "metrics.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"update": 500, "valid_ppl": 9.0}) + "\n")
    assert names(average.select_checkpoints(root, 1, None)) == ["update-0000500.safetensors"]
    with pytest.raises(UserError, match=r"best 2 checkpoints but .* holds 1 with a finite validation score"):
        average.select_checkpoints(root, 2, None)


def test_best_selection_drops_a_partial_last_line(tmp_path: Path) -> None:
    """A crash or a full disk mid-line leaves a partial last record: dropped, as the trainer drops it."""
    root = model_dir(tmp_path)
    with open(root / "metrics.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"update": 700, "valid_p')
    assert names(average.select_checkpoints(root, 1, None)) == ["update-0000500.safetensors"]


def tied_model(seed: int) -> Seq2Seq:
    torch.manual_seed(seed)
    sizes = {"FF_NUM_HIDDEN": "32", "NUM_HIDDEN": "16"}
    config = ModelConfig(ENCODERS["E1"], DECODERS["D1"], 30, 40, d_model=16, heads=4, variables=sizes, tie_output=True)
    return Seq2Seq(config)


def test_the_weights_digest_is_the_same_whichever_model_wrote_them(tmp_path: Path) -> None:
    """Provenance digests weights by their tensors: two models' files of the same weights, and a file written before
    models were named (no name in its metadata), digest alike, averages too (their metadata is their first
    checkpoint's, in no fixed order)."""
    model = tied_model(1)
    folders = [tmp_path / name for name in ("one", "two", "before")]
    for folder, model_id in zip(folders, ("a", "b"), strict=False):
        for update in (100, 200):
            ckpt.save_weights(model, ModelDir(folder).weights_path(update), model_id)
    tensors, metadata = ckpt.stored_tensors(model)
    assert metadata  # the tied tensor's note: a file with metadata of its own besides the name
    for update in (100, 200):
        path = ModelDir(folders[2]).weights_path(update)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path), metadata=metadata)  # as written before models were named
    files = [ModelDir(folder).weights_path(100) for folder in folders]
    averages = [average.write_average(folder, average.select_checkpoints(folder, None, 2)) for folder in folders]
    for group in (files, averages):
        assert len({file_sha256(path) for path in group}) == 3  # the files differ by the name alone
        assert len({weights_digest(path) for path in group}) == 1
    ckpt.save_weights(tied_model(2), other := tmp_path / "other.safetensors", "a")
    assert weights_digest(other) != weights_digest(files[0])  # other weights, the same model's name


def test_tied_weights_round_trip(tmp_path: Path) -> None:
    models = [tied_model(seed) for seed in (1, 2)]
    for update, model in zip((100, 200), models, strict=True):
        ckpt.save_weights(model, ModelDir(tmp_path).weights_path(update), "m")
    paths = average.select_checkpoints(tmp_path, None, 2)
    output = average.write_average(tmp_path, paths)
    assert output == tmp_path / "averaged.safetensors"
    with safe_open(str(output), framework="pt") as handle:
        stored = set(handle.keys())
        assert handle.metadata()["adlnmt_averaged_from"] == "update-0000100.safetensors,update-0000200.safetensors"
    assert len({"output.weight", "tgt_embed.weight"} & stored) == 1  # the tied tensor is stored once
    fresh = tied_model(3)
    load_weights(fresh, output)  # load_model(strict=False), then rejects anything missing or unexpected
    assert fresh.output.weight is fresh.tgt_embed.weight
    expected = {
        name: (a + b) / 2
        for (name, a), (_, b) in zip(models[0].state_dict().items(), models[1].state_dict().items(), strict=True)
    }
    for name, value in fresh.state_dict().items():
        torch.testing.assert_close(value, expected[name], msg=name)


def test_average_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = model_dir(tmp_path)
    parser = argparse.ArgumentParser()
    average.add_average_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["average", "--model", str(root), "--best", "2", "--output", str(tmp_path / "x.st")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "update-0000400.safetensors" in out and "update-0000500.safetensors" in out and "x.st" in out
    assert torch.equal(load_file(str(tmp_path / "x.st"))["w"], torch.full((2,), 450.0))
    args = parser.parse_args(["average", "--model", str(root), "--last", "3"])
    assert args.func(args) == 0
    assert torch.equal(load_file(str(root / "averaged.safetensors"))["w"], torch.full((2,), 500.0))
    for wrong in (["average", "--model", str(root)], ["average", "--model", str(root), "--best", "1", "--last", "1"]):
        with pytest.raises(SystemExit):
            parser.parse_args(wrong)
    for flag in ("--last", "--best"):  # the shared wording of adlnmt.bounds (was "must be at least 1, not 0")
        with pytest.raises(SystemExit):
            parser.parse_args(["average", "--model", str(root), flag, "0"])
        assert f"argument {flag}: must be >= 1, got 0" in capsys.readouterr().err
    with pytest.raises(UserError, match=r"^--last must be >= 1, got 0$"):
        average.select_checkpoints(root, None, 0)


def test_the_command_names_a_directory_without_a_model(tmp_path: Path) -> None:
    """A missing directory, an export or a corpus folder was answered 'asked for the last 1 checkpoints but
    DIR/checkpoints holds 0; training keeps as many checkpoint files as --keep-last/--keep-best say', as if the
    model had pruned them; it is now named as no model directory."""
    parser = argparse.ArgumentParser()
    average.add_average_command(parser.add_subparsers(dest="command"))
    (tmp_path / "export.json").write_text("{}")
    for directory in (tmp_path, tmp_path / "missing"):
        for which in (["--last", "1"], ["--best", "1"]):
            args = parser.parse_args(["average", "--model", str(directory), *which])
            with pytest.raises(UserError, match=rf"^{re.escape(str(directory))}: not a model directory \(no config"):
                args.func(args)
    assert not (tmp_path / "averaged.safetensors").exists()


def test_the_command_names_a_damaged_config(tmp_path: Path) -> None:
    """A damaged config.json was not read: the average was written into the broken model directory."""
    root = model_dir(tmp_path)
    (root / "config.json").write_text('{"train": {')
    parser = argparse.ArgumentParser()
    average.add_average_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["average", "--model", str(root), "--last", "1"])
    with pytest.raises(UserError, match=rf"^{re.escape(str(root / 'config.json'))}: damaged"):
        args.func(args)
    assert not (root / "averaged.safetensors").exists()


def test_the_output_never_replaces_the_models_weights_or_a_file_without_weights(tmp_path: Path) -> None:
    """``--output`` named the model's best weights, one of its checkpoints or a text file and replaced it without a
    word; each is refused and left as it was. An earlier average is replaced, as before."""
    root = model_dir(tmp_path / "m")
    save_file({"w": torch.zeros(2)}, str(root / "best.safetensors"))
    (tmp_path / "notes.txt").write_text("my notes")
    parser = argparse.ArgumentParser()
    average.add_average_command(parser.add_subparsers(dest="command"))
    refused = [
        (root / "best.safetensors", "the model's own weights"),
        (root / "checkpoints" / "update-0000300.safetensors", "the model's own weights"),
        (tmp_path / "notes.txt", r"exists and holds no weights \(not a safetensors file\); it is not replaced"),
        (tmp_path, "a directory; give the file to write"),
    ]
    for output, message in refused:
        before = output.read_bytes() if output.is_file() else None
        args = parser.parse_args(["average", "--model", str(root), "--last", "2", "--output", str(output)])
        with pytest.raises(UserError, match=rf"^--output {re.escape(str(output))}: {message}"):
            args.func(args)
        assert before is None or output.read_bytes() == before
    args = parser.parse_args(["average", "--model", str(root), "--last", "2", "--output", f"{tmp_path}/new/"])
    with pytest.raises(UserError, match=rf"^--output {re.escape(str(tmp_path))}/new/: a directory; give the file"):
        args.func(args)  # Path("new/") is new: the average was written as the file new
    earlier = tmp_path / "avg.safetensors"
    save_file({"w": torch.zeros(2)}, str(earlier))
    args = parser.parse_args(["average", "--model", str(root), "--last", "2", "--output", str(earlier)])
    assert args.func(args) == 0 and torch.equal(load_file(str(earlier))["w"], torch.full((2,), 550.0))
