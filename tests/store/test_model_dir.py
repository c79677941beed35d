"""store.ModelDir: config.json checked, checkpoints listed and resolved, metrics.jsonl read tolerating a partial
last line, the vocabulary checked, weights loaded; ``import adlnmt.store`` without PyTorch."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from adlnmt.data.data_dir import DataDir
from adlnmt.errors import UserError
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.store import ModelDir, load_weights
from adlnmt.store.model_dir import validation_score, weights_digest, weights_model_id
from adlnmt.train.checkpoint import save_weights
from adlnmt.train.model_dir import vocabulary_files, vocabulary_hashes

CONFIG = ModelConfig("pos -> res(ffl)", "pos -> res(mh_dot_src_att) -> res(ffl)", 150, 150, d_model=16, heads=2)


def write_config(model_dir: Path, stored: object) -> Path:
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(stored), encoding="utf-8")
    return model_dir / "config.json"


@pytest.fixture
def model_dir(demo_data: Path, tmp_path: Path) -> Path:
    """A model directory as training leaves it (config.json, vocab/, checkpoints, best, metrics), made by hand."""
    data = DataDir.load(demo_data / "data")
    root = tmp_path / "model"
    for name in vocabulary_files(data):
        (root / "vocab").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data.path / name, root / "vocab" / name)
    write_config(root, {"train": {"data": "x"}, "model": CONFIG.to_dict(), "vocab_sha256": vocabulary_hashes(data)})
    files = ModelDir(root)
    for update in (10, 20, 30):
        torch.manual_seed(update)
        save_weights(Seq2Seq(CONFIG), files.weights_path(update), "m")
    shutil.copyfile(files.weights_path(20), files.best_weights)
    files.write_metrics([{"update": 10, "valid_ppl": 9.0}, {"update": 20, "valid_ppl": 7.0}])
    return root


def test_paths_follow_the_names(tmp_path: Path) -> None:
    files = ModelDir(tmp_path)
    assert files.weights_path(1200) == tmp_path / "checkpoints" / "update-0001200.safetensors"
    assert files.state_path(1200) == tmp_path / "states" / "update-0001200.state.pt"
    assert (files.config_file, files.metrics_file) == (tmp_path / "config.json", tmp_path / "metrics.jsonl")
    assert (files.best_weights.name, files.averaged_weights.name) == ("best.safetensors", "averaged.safetensors")


def test_config_is_checked_and_errors_name_the_file(tmp_path: Path) -> None:
    files = ModelDir(tmp_path)
    assert not files.exists()
    with pytest.raises(UserError, match=f"^{tmp_path}: not a model directory \\(no config.json\\)$"):
        files.config()
    path = tmp_path / "config.json"
    for text, reason in (
        ('{"train": {}, "mod', "damaged"),
        ("\xff\xfe", "damaged"),
        ("[1, 2]", "malformed \\(expected the objects 'train' and 'model'\\)"),
        ('{"model": {}}', "malformed \\(expected the objects 'train' and 'model'\\)"),
        ('{"train": {}, "model": []}', "malformed \\(expected the objects 'train' and 'model'\\)"),
        ('{"train": {}, "model": {"layers": 7}}', "malformed model entry"),
        ('{"model_type": "marian"}', "a Hugging Face model \\(marian\\), not an adlnmt model directory; import it"),
    ):
        path.write_bytes(text.encode("latin-1"))
        with pytest.raises(UserError, match=f"^{path}: {reason}"):
            files.config()
    stored = {"train": {}, "model": {k: v for k, v in CONFIG.to_dict().items() if k != "init"}, "parameters": 5}
    write_config(tmp_path, stored)
    config = files.config()
    assert config["model"] == CONFIG.to_dict() and config["parameters"] == 5  # init: its default


def test_checkpoints_are_listed_oldest_first_and_other_files_ignored(tmp_path: Path) -> None:
    files = ModelDir(tmp_path)
    assert files.checkpoints() == {} and files.states() == []
    for path in (files.weights_path(1000), files.weights_path(200), files.state_path(200)):
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"")
    for name in ("notes.txt", "update-5.safetensors", ".update-0000300.safetensors.tmp-7", "update-0000300.pt"):
        (files.checkpoints_dir / name).write_bytes(b"")
    assert files.checkpoints() == {200: files.weights_path(200), 1000: files.weights_path(1000)}
    assert list(files.checkpoints()) == [200, 1000]  # by number, not by name
    assert files.states() == [(200, files.state_path(200))]
    assert files.checkpoint_files() == [
        (200, files.weights_path(200)),
        (200, files.state_path(200)),
        (1000, files.weights_path(1000)),
    ]


def test_checkpoint_resolution(model_dir: Path, tmp_path: Path) -> None:
    files = ModelDir(model_dir)
    assert files.resolve("best") == model_dir / "best.safetensors"
    assert files.resolve("averaged") == model_dir / "averaged.safetensors"
    assert files.resolve("last") == files.weights_path(30)
    assert files.resolve(str(tmp_path / "w.safetensors")) == tmp_path / "w.safetensors"
    with pytest.raises(UserError, match=f"^{tmp_path / 'empty'}: no checkpoints yet$"):
        ModelDir(tmp_path / "empty").resolve("last")


def test_metrics_drop_a_partial_last_line_and_a_later_record_wins(tmp_path: Path) -> None:
    files = ModelDir(tmp_path)
    assert files.metrics() == ([], None) and files.checkpoint_records() == []
    files.write_metrics([{"update": 20, "valid_ppl": 5.0}, {"update": 10, "valid_ppl": 6.0}])
    files.append_metrics({"update": 20, "valid_ppl": 4.0})  # a resumed run logs its checkpoint again
    with open(files.metrics_file, "a", encoding="utf-8") as handle:
        handle.write('{"update": 30, "valid')
    records, partial = files.metrics()
    assert [r["update"] for r in records] == [20, 10, 20] and partial and "partial last line dropped" in partial
    assert files.checkpoint_records() == [{"update": 10, "valid_ppl": 6.0}, {"update": 20, "valid_ppl": 4.0}]


def test_load_model_loads_the_resolved_weights_and_the_vocabulary(model_dir: Path) -> None:
    model, data, max_len = ModelDir(model_dir).load_model("last")
    torch.manual_seed(30)
    expected = Seq2Seq(CONFIG).state_dict()
    assert all(torch.equal(value, expected[name]) for name, value in model.state_dict().items())
    assert data.path == model_dir / "vocab" and data.src_vocab.size == 150
    assert max_len == data.manifest["options"]["max_len"]
    with pytest.raises(UserError, match=r"averaged\.safetensors: checkpoint not found"):
        ModelDir(model_dir).load_model("averaged")


def test_a_swapped_or_missing_vocabulary_file_is_named(model_dir: Path) -> None:
    files = ModelDir(model_dir)
    (model_dir / "vocab" / "spm.model").write_bytes(b"another model")
    with pytest.raises(UserError, match=f"^{model_dir / 'vocab' / 'spm.model'}: not the vocabulary"):
        files.vocabularies()
    (model_dir / "vocab" / "spm.model").unlink()
    with pytest.raises(UserError, match=f"^{model_dir / 'vocab' / 'spm.model'}: missing"):
        files.vocabularies()
    stored = files.config()
    del stored["vocab_sha256"]
    with pytest.raises(UserError, match=f"^{files.config_file}: malformed \\(vocab_sha256 is not a mapping"):
        files.vocabularies(stored)


def test_weights_of_another_model_are_refused(model_dir: Path) -> None:
    other = Seq2Seq(ModelConfig("pos -> res(ffl) -> norm", CONFIG.decoder, 150, 150, d_model=16, heads=2))
    with pytest.raises(UserError, match=r"best\.safetensors: does not match the model"):
        load_weights(other, ModelDir(model_dir).best_weights)


def test_weights_written_by_another_model_of_the_same_shapes_are_refused(model_dir: Path, tmp_path: Path) -> None:
    """``--checkpoint OTHER/best.safetensors``: same shapes and vocabulary, another model's name in its metadata."""
    files = ModelDir(model_dir)
    stored = files.config()
    write_config(model_dir, {**stored, "model_id": "m"})
    assert files.model_id() == "m"
    files.load_model("best")  # its own weights
    other = tmp_path / "other.safetensors"
    save_weights(Seq2Seq(CONFIG), other, "n")
    with pytest.raises(
        UserError,
        match=rf"^{other}: the weights of another model \(model id n\), not of "
        rf"{model_dir} \(model id m\); give the folder of the model they belong to",
    ):
        files.load_model(str(other))
    from safetensors.torch import save_model  # a file written before models were named, or by another program

    save_model(Seq2Seq(CONFIG), str(other))
    files.load_model(str(other))
    write_config(model_dir, stored)  # a model made before models were named loads any weights that fit
    save_weights(Seq2Seq(CONFIG), other, "n")
    assert files.model_id() is None
    files.load_model(str(other))


@pytest.mark.parametrize(
    "content",
    [b"", b"\x03\x00\x00\x00\x00\x00\x00\x00[1]", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json", b"text"],
    ids=["empty", "header not an object", "header not JSON", "short"],
)
def test_a_file_that_is_not_safetensors_is_named_by_both_header_readers(tmp_path: Path, content: bytes) -> None:
    """The weights' name and digest read one header; a damaged file is one clear error from either, never a
    traceback."""
    path = tmp_path / "best.safetensors"
    path.write_bytes(content)
    for read in (weights_model_id, weights_digest):
        with pytest.raises(UserError, match=rf"^{path}: not a readable weights file \("):
            read(path)


def test_importing_the_store_does_not_import_torch() -> None:
    probe = "import sys, adlnmt.store; print(sorted(m for m in ('torch', 'safetensors.torch') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_weights_of_other_shapes_are_a_mismatch_not_a_damaged_file(model_dir: Path) -> None:
    """Issue 69 point 20: a shape mismatch read "not a readable safetensors checkpoint"."""
    other = Seq2Seq(ModelConfig(CONFIG.encoder, CONFIG.decoder, 150, 150, d_model=32, heads=2))
    with pytest.raises(UserError, match=r"best\.safetensors: does not match the model \(size mismatch for "):
        load_weights(other, ModelDir(model_dir).best_weights)


def test_a_validated_checkpoint_is_scored_by_the_early_stopping_metric() -> None:
    """Higher is better: BLEU, or minus the perplexity (a record without BLEU ranks below every BLEU); NaN is worst."""
    record = {"valid_ppl": 6.0, "valid_bleu": 30.0}
    assert (validation_score(record, "ppl"), validation_score(record, "bleu")) == (-6.0, 30.0)
    assert validation_score({"valid_ppl": 6.0}, "bleu") == -6.0
    assert (
        validation_score({"valid_ppl": math.nan}, "ppl")
        == validation_score({"valid_ppl": 1.0, "valid_bleu": math.nan}, "bleu")
        == -math.inf
    )
