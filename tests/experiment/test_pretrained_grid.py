"""A grid whose variants start from one pretrained model (``train.init_from``) on data encoded with its vocabulary
(``data.vocab_from``): the model's own architecture and a changed decoder run end to end, the fingerprints follow the
model's content, and bad settings are named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file, save_file

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.experiment.grid import load_grid
from adlnmt.experiment.runner import plan_runs, prepare_data
from adlnmt.store import ModelDir
from adlnmt.train.init_from import pretrained_digest

from .test_experiment import experiment, read_csv, run_dir

ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODER = "pos -> repeat(1, res_nd({x}) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"
QUICK = ["--batch-tokens", "600", "--no-progress", "--threads", "1", "--no-valid-bleu", "--tensorboard", "off"]


@pytest.fixture(scope="module")
def pretrained(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny adlnmt model trained on the demo corpus: the "pretrained" model of the grids below."""
    model = tmp_path_factory.mktemp("pretrained") / "model"
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(model), "--encoder", ENCODER,
            "--decoder", DECODER.format(x="mh_dot_self_att"), "--d-model", "32", "--heads", "4",
            "--max-updates", "3", "--checkpoint-interval", "3", *QUICK]  # fmt: skip
    assert main(argv) == 0
    return model


def write_grid(root: Path, corpus: str, model: str, **changes: object) -> Path:
    """A grid in ``root`` whose paths (``corpus``, ``model``) are relative to it; ``changes`` replace its keys."""
    files = {f"{split}_{side}": f"{corpus}/{split}.{side}" for split in ("train", "valid") for side in ("src", "tgt")}
    grid = {
        "name": "pretrained",
        "data": {**files, "vocab_from": model},
        "test": [{"name": "test", "src": f"{corpus}/test.src", "ref": f"{corpus}/test.tgt"}],
        "metrics": ["bleu"],
        "bootstrap_resamples": 50,
        "train": {"init_from": model, "max_updates": 2, "checkpoint_interval": 2, "batch_tokens": 600,
                  "valid_bleu": False, "tensorboard": "off"},
        "variants": [{"name": "as imported"}, {"name": "AAN decoder", "decoder": DECODER.format(x="aan")}],
        **changes,
    }  # fmt: skip
    path = root / "grid.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


def test_variants_start_from_the_pretrained_model_as_it_is_and_changed(
    demo_data: Path, pretrained: Path, tmp_path: Path
) -> None:
    (tmp_path / "corpus").symlink_to(demo_data / "corpus")
    shutil.copytree(pretrained, tmp_path / "model")
    grid = write_grid(tmp_path, "corpus", "model")
    out = tmp_path / "out"
    status, stdout = experiment(str(grid), "--out", str(out), "--threads", "1")
    assert status == 0, stdout
    assert [(row["variant"], row["seeds_finished"]) for row in read_csv(out / "results.csv")] == [
        ("as imported", "1"), ("AAN decoder", "1")]  # fmt: skip
    data = json.loads((out / "data" / "default" / "manifest.json").read_text())
    assert data["inputs"]["vocab_from"] == str((tmp_path / "model" / "vocab").resolve())
    model_vocab = ModelDir(tmp_path / "model").vocabularies()
    assert (out / "data" / "default" / data["spm"]["tgt"]).read_bytes() == (
        model_vocab.path / model_vocab.manifest["spm"]["tgt"]
    ).read_bytes()

    same, changed = (run_dir(out, slug, 1) / "model" for slug in ("as-imported", "AAN-decoder"))
    record = json.loads((same / "init_from.json").read_text())
    assert record["copied"] and record["initialised"] == {} and record["unused"] == []
    assert ModelDir(same).config()["model"] == ModelDir(tmp_path / "model").config()["model"]
    record = json.loads((changed / "init_from.json").read_text())
    assert record["unused"] and record["initialised"]  # the self-attention's weights; the AAN's, new
    assert all(name.startswith("decoder.") for name in [*record["initialised"], *record["unused"]])
    assert any(name.startswith("encoder.") for name in record["copied"])
    ours, theirs = ModelDir(changed).config()["model"], ModelDir(tmp_path / "model").config()["model"]
    assert ours["encoder"] == theirs["encoder"] and "aan" in ours["decoder"]  # the decoder alone changed

    status, stdout = experiment(str(grid), "--out", str(out), "--threads", "1")  # the data is reused, runs done
    assert status == 0 and "2 finished (skipped), 0 to run" in stdout, stdout

    best = tmp_path / "model" / "best.safetensors"
    weights = load_file(best)
    save_file({name: tensor * 0.5 for name, tensor in weights.items()}, best)  # the pretrained model changed
    status, stdout = experiment(str(grid), "--out", str(out), "--threads", "1", "--variants", "as imported")
    assert status == 1 and "FAILED as imported seed 1: not run: " in stdout, stdout  # trained from the old one
    assert "other settings (its data or the model it starts from)" in stdout and "--rerun" in stdout
    status, stdout = experiment(str(grid), "--out", str(out), "--threads", "1", "--variants", "as imported", "--rerun")
    assert status == 0, stdout
    record = json.loads((same / "init_from.json").read_text())
    assert record["initialised"] == {} and record["sha256"] == pretrained_digest(tmp_path / "model")
    spm = model_vocab.path / model_vocab.manifest["spm"]["src"]
    spm.write_bytes(spm.read_bytes() + b"\0")  # the model's vocabulary changed: its data is stale
    with pytest.raises(UserError, match=r"data/default was prepared with other vocab_from \(its vocabulary changed"):
        prepare_data(load_grid(grid), out, log=pytest.fail)


def test_the_fingerprints_follow_the_pretrained_models_content_not_where_it_lies(
    demo_data: Path, pretrained: Path, tmp_path: Path
) -> None:
    for name in ("first", "second/deeper"):
        (tmp_path / name).mkdir(parents=True)
        shutil.copytree(demo_data / "corpus", tmp_path / name / "corpus")
        shutil.copytree(pretrained, tmp_path / name / "model")
        write_grid(tmp_path / name, "corpus", "model")

    def prints(name: str) -> list[tuple[str, str]]:
        runs = plan_runs(load_grid(tmp_path / name / "grid.yaml"), tmp_path / "out")
        return [(run.train_fingerprint, run.fingerprint) for run in runs]

    first = prints("first")
    status, stdout = experiment(str(tmp_path / "first" / "grid.yaml"), "--dry-run", "--out", str(tmp_path / "out"))
    assert status == 0 and stdout.count("seed 1 new") == 2, stdout
    assert prints("second/deeper") == first
    best = tmp_path / "second" / "deeper" / "model" / "best.safetensors"
    weights = load_file(best)
    name = next(iter(weights))
    save_file({**weights, name: weights[name] + 1}, best)  # the same path and size, other weights
    moved = prints("second/deeper")
    assert all(ours[0] != theirs[0] for ours, theirs in zip(moved, first, strict=True))

    vocab = ModelDir(tmp_path / "first" / "model").vocabularies()
    spm = vocab.path / vocab.manifest["spm"]["src"]
    spm.write_bytes(spm.read_bytes() + b"\0")  # another vocabulary of the same model path
    scratch = [{"name": "scratch", "preset": "transformer-small"}]  # trained from scratch on the model's vocabulary
    grid = write_grid(tmp_path / "first", "corpus", "model", train={"d_model": 32, "heads": 4}, variants=scratch)
    scratch = plan_runs(load_grid(grid), tmp_path / "out")[0].train_fingerprint
    shutil.copyfile(tmp_path / "second" / "deeper" / "model" / "vocab" / spm.name, spm)
    assert plan_runs(load_grid(grid), tmp_path / "out")[0].train_fingerprint != scratch


def grid_error(tmp_path: Path, pretrained: Path, **changes: object) -> str:
    with pytest.raises(UserError) as caught:
        load_grid(write_grid(tmp_path, "corpus", str(pretrained), **changes))
    return str(caught.value)


def test_bad_pretrained_settings_are_named(pretrained: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    train = {"init_from": "empty", "max_updates": 2}
    assert grid_error(tmp_path, pretrained, train=train).endswith(
        f"grid.yaml: train.init_from: {tmp_path / 'empty'}: not a model directory (no config.json)"
    )
    variants = [{"name": "v", "train": {"init_from": "missing"}}]
    assert "variants[0] ('v').train.init_from: " in grid_error(tmp_path, pretrained, variants=variants)
    data = {"train_src": "c/a", "train_tgt": "c/a", "valid_src": "c/a", "valid_tgt": "c/a", "vocab_from": "empty"}
    assert "grid.yaml: data.vocab_from: " in grid_error(tmp_path, pretrained, data=data)
    message = grid_error(tmp_path, pretrained, train={}, variants=[{"name": "v"}])
    assert "variants[0] ('v'): give either 'preset' or both 'encoder' and 'decoder'" in message
    assert "or train.init_from" in message
    variants = [{"name": "v", "preset": "transformer-small", "decoder": DECODER.format(x="aan")}]
    assert "variants[0] ('v'): give either 'preset' or 'encoder' and 'decoder'" in grid_error(
        tmp_path, pretrained, variants=variants
    )
    data = {**data, "vocab_from": str(pretrained), "vocab_size": 100}
    assert "grid.yaml: data: vocab_size with vocab_from: " in grid_error(tmp_path, pretrained, data=data)
    scales = {"s": {"data": {"model_type": "unigram"}}}
    message = grid_error(tmp_path, pretrained, scales=scales, default_scale="s")
    assert "grid.yaml: scales.s.data: model_type with vocab_from: " in message
    shutil.copytree(pretrained, tmp_path / "other")
    variants = [{"name": "v", "data": {"vocab_from": "other"}}]
    assert "variants[0] ('v').data.vocab_from: one model vocabulary per grid" in grid_error(
        tmp_path, pretrained, variants=variants
    )
    variants = [{"name": "v", "data": {"joint": False}}]
    assert "variants[0] ('v').data: joint with vocab_from" in grid_error(tmp_path, pretrained, variants=variants)
    data = {key: value for key, value in data.items() if key not in ("vocab_from", "vocab_size")}
    assert "variants[0] ('as imported'): train.init_from needs data encoded with the model's vocabulary" in (
        grid_error(tmp_path, pretrained, data=data)
    )


def test_a_shallower_scale_takes_the_pretrained_architecture_shallower(pretrained: Path, tmp_path: Path) -> None:
    deeper = tmp_path / "deeper"
    shutil.copytree(pretrained, deeper)
    stored = json.loads((deeper / "config.json").read_text())
    stored["model"]["encoder"] = ENCODER.replace("repeat(1,", "repeat(4,")
    (deeper / "config.json").write_text(json.dumps(stored))
    path = write_grid(tmp_path, "corpus", "deeper", scales={"full": {}, "half": {"repeat_scale": 0.5}})
    assert "encoder" not in load_grid(path, "full").variant("as imported").train  # the model's own, as it is
    half = load_grid(path, "half")
    own, changed = half.variant("as imported").train, half.variant("AAN decoder").train
    assert own["encoder"] == changed["encoder"] == ENCODER.replace("repeat(1,", "repeat(2,")
    assert own["decoder"] == stored["model"]["decoder"] and "aan" in changed["decoder"]


def test_a_preset_variant_keeps_the_pretrained_models_sizes(pretrained: Path, tmp_path: Path) -> None:
    """A variant with a preset is surgery at the pretrained model's sizes (the preset's own sizes were refused as if
    the grid gave them: '--d-model 256: --init-from ... keeps the model's d_model')."""
    variants = [{"name": "small", "preset": "transformer-small"}]
    loaded = load_grid(write_grid(tmp_path, "corpus", str(pretrained), variants=variants))
    options = loaded.variants[0].train
    assert options["preset"] == "transformer-small" and "d_model" not in options
