"""A trained model directory is self-contained and movable: it keeps the vocabularies it translates with, and a
copy resumes with the same data given by another path (the data is compared by its manifest, not its path)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from adlnmt.cli import main
from adlnmt.train.model_dir import load_vocabularies, read_stored_config

from .harness import records, train_argv


def test_a_moved_model_keeps_its_vocabularies_and_resumes(demo_data: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(demo_data)
    assert main(train_argv(Path("data"), tmp_path / "model", 10)) == 0  # a relative --data
    moved = tmp_path / "elsewhere" / "model"
    shutil.copytree(tmp_path / "model", moved)
    monkeypatch.chdir(tmp_path)
    vocabularies = load_vocabularies(moved, read_stored_config(moved))
    assert vocabularies.path == moved / "vocab"
    assert vocabularies.src_vocab.encode("ein Hund") and vocabularies.manifest["joint"] is True
    source = tmp_path / "in.txt"
    source.write_text((demo_data / "corpus" / "test.src").read_text().splitlines()[0] + "\n")
    outputs = []
    for model in (tmp_path / "model", moved):  # from another directory, and moved: the same translation
        out = tmp_path / f"out-{len(outputs)}.txt"
        assert main(["translate", "--model", str(model), "--input", str(source), "--output", str(out)]) == 0
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] and outputs[0].strip()
    assert main(train_argv(demo_data / "data", moved, 20)) == 0  # the same data by another path: resumed
    assert [r["update"] for r in records(moved)] == [10, 20]


def test_other_data_is_a_different_setting(demo_data: Path, tmp_path: Path, capsys) -> None:
    assert main(train_argv(demo_data / "data", tmp_path / "model", 10)) == 0
    other = tmp_path / "data"
    shutil.copytree(demo_data / "data", other)
    (other / "manifest.json").write_text(
        (other / "manifest.json").read_text().replace('"max_ratio": 3.0', '"max_ratio": 2.5')
    )
    assert main(train_argv(other, tmp_path / "model", 20)) == 2
    assert "different settings (data)" in capsys.readouterr().err


def test_a_run_from_before_a_setting_existed_resumes(demo_data: Path, tmp_path: Path) -> None:
    """A setting added to adlnmt after a run started (here ``init``) counts as its default when the run resumes."""
    model = tmp_path / "model"
    assert main(train_argv(demo_data / "data", model, 10)) == 0
    stored = json.loads((model / "config.json").read_text())
    del stored["train"]["init"], stored["model"]["init"]
    (model / "config.json").write_text(json.dumps(stored))
    assert main(train_argv(demo_data / "data", model, 20)) == 0
    assert [r["update"] for r in records(model)] == [10, 20]
