"""A trained model directory is self-contained and movable: it keeps the vocabularies it translates with, and a
copy resumes with the same data given by another path (the data is compared by its manifest, not its path)."""

from __future__ import annotations

import json
import shutil
from hashlib import sha256
from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.data.prepare import prepare
from adlnmt.store import ModelDir

from .harness import records, train_argv


def test_a_moved_model_keeps_its_vocabularies_and_resumes(demo_data: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(demo_data)
    assert main(train_argv(Path("data"), tmp_path / "model", 10)) == 0  # a relative --data
    moved = tmp_path / "elsewhere" / "model"
    shutil.copytree(tmp_path / "model", moved)
    monkeypatch.chdir(tmp_path)
    vocabularies = ModelDir(moved).vocabularies()
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


@pytest.fixture(scope="module")
def other_spm(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sentencepiece model of the same size from another ``prepare`` (unigram instead of BPE): a valid file that
    gives the same ids other pieces."""
    corpus, out = demo_data / "corpus", tmp_path_factory.mktemp("other-data") / "data"
    prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt", out,
            vocab_size=150, model_type="unigram")  # fmt: skip
    assert (out / "spm.model").read_bytes() != (demo_data / "data" / "spm.model").read_bytes()
    return out / "spm.model"


def test_a_resume_on_data_with_another_vocabulary_is_refused(
    demo_data: Path, other_spm: Path, tmp_path: Path, capsys
) -> None:
    """The data's manifest is unchanged but its spm.model was replaced: the resume is refused, naming the file, and
    the model's own vocabulary is left as it was (never overwritten by the data's)."""
    model = tmp_path / "model"
    assert main(train_argv(demo_data / "data", model, 10)) == 0
    own = (model / "vocab" / "spm.model").read_bytes()
    swapped = tmp_path / "data"
    shutil.copytree(demo_data / "data", swapped)
    shutil.copyfile(other_spm, swapped / "spm.model")
    capsys.readouterr()
    assert main(train_argv(swapped, model, 20)) == 2
    err = capsys.readouterr().err
    assert f"{swapped / 'spm.model'}: not the vocabulary {model} was trained with" in err, err
    assert (model / "vocab" / "spm.model").read_bytes() == own
    assert [r["update"] for r in records(model)] == [10]
    assert json.loads((model / "config.json").read_text())["vocab_sha256"]["spm.model"] == sha256(own).hexdigest()


def test_a_swapped_model_vocabulary_is_refused_by_every_command(
    demo_data: Path, other_spm: Path, tmp_path: Path, capsys
) -> None:
    """MODEL/vocab/spm.model replaced by hand: train (resume), translate, export and serve refuse the model, naming
    the file; none translates with it."""
    model = tmp_path / "model"
    assert main(train_argv(demo_data / "data", model, 10)) == 0
    shutil.copyfile(other_spm, model / "vocab" / "spm.model")
    source = tmp_path / "in.txt"
    source.write_text("ein Hund\n")
    commands = {
        "train": train_argv(demo_data / "data", model, 20),
        "translate": ["translate", "--model", str(model), "--input", str(source), "--output", str(tmp_path / "o")],
        "export": ["export", "--model", str(model), "--format", "onnx", "--out", str(tmp_path / "export")],
        "serve": ["serve", "--model", str(model), "--port", "0"],
    }
    for name, argv in commands.items():
        capsys.readouterr()
        assert main(argv) == 2, name
        err = capsys.readouterr().err
        assert f"{model / 'vocab' / 'spm.model'}: not the vocabulary {model} was trained with" in err, (name, err)
    assert not (tmp_path / "o").exists() and not (tmp_path / "export").exists()
