"""``adlnmt train --init-from MODEL`` on data prepared with ``--vocab-from MODEL``: the weights start as MODEL's, a
changed architecture copies what matches by path and shape and records the rest, other vocabularies are refused, and
a resumed run does not initialise again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from safetensors.torch import load_file

from adlnmt.cli import main
from adlnmt.store import ModelDir
from interop.marian_fixtures import marian_dir

pytest.importorskip("transformers")

TRAIN = ["--batch-tokens", "600", "--no-progress", "--threads", "1", "--no-valid-bleu", "--tensorboard", "off"]


def import_and_prepare(demo_data: Path, root: Path, **marian: Any) -> Path:
    """A tiny MarianMT directory (``marian``: its settings) imported as ROOT/model, and the demo corpus prepared
    with its vocabulary as ROOT/data."""
    marian_dir(demo_data / "corpus", root / "hf", **marian)
    assert main(["import", str(root / "hf"), "--from", "hf-marian", "--out", str(root / "model")]) == 0
    corpus = demo_data / "corpus"
    argv = ["prepare", "--train-src", str(corpus / "train.src"), "--train-tgt", str(corpus / "train.tgt"),
            "--valid-src", str(corpus / "valid.src"), "--valid-tgt", str(corpus / "valid.tgt"),
            "--out", str(root / "data"), "--vocab-from", str(root / "model")]  # fmt: skip
    assert main(argv) == 0
    return root


@pytest.fixture(scope="module")
def pretrained(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_and_prepare(demo_data, tmp_path_factory.mktemp("pretrained"), seed=2)


def train(root: Path, model: str, *flags: str) -> int:
    argv = ["train", "--data", str(root / "data"), "--model", str(root / model),
            "--init-from", str(root / "model"), *TRAIN, *flags]  # fmt: skip
    return main(argv)


def test_prepare_vocab_from_copies_the_models_vocabulary(pretrained: Path) -> None:
    model_vocab = ModelDir(pretrained / "model").vocabularies()
    manifest = json.loads((pretrained / "data" / "manifest.json").read_text())
    for side in ("src", "tgt"):
        theirs = (pretrained / "data" / manifest["spm"][side]).read_bytes()
        assert theirs == (model_vocab.path / model_vocab.manifest["spm"][side]).read_bytes()
    # the manifest describes the copied models (an import's say "marian"), not prepare's defaults ("bpe")
    assert (manifest["model_type"], manifest["joint"]) == (
        model_vocab.manifest["model_type"],
        model_vocab.manifest["joint"],
    )
    assert manifest["model_type"] == "marian"


def test_vocabulary_flags_that_vocab_from_would_ignore_are_refused(pretrained: Path, tmp_path: Path, capsys) -> None:
    corpus = pretrained.parent  # any files: the flags are refused before they are read
    argv = [
        "prepare",
        "--train-src",
        str(corpus),
        "--train-tgt",
        str(corpus),
        "--valid-src",
        str(corpus),
        "--valid-tgt",
        str(corpus),
        "--out",
        str(tmp_path / "data"),
        "--vocab-from",
        str(pretrained / "model"),
    ]
    assert main([*argv, "--vocab-size", "77", "--model-type", "unigram"]) == 2
    err = capsys.readouterr().err
    assert "--vocab-size, --model-type with --vocab-from: the model's vocabulary decides them" in err
    assert not (tmp_path / "data").exists()


def test_init_from_starts_from_the_models_weights(pretrained: Path) -> None:
    assert train(pretrained, "same", "--max-updates", "1", "--checkpoint-interval", "1", "--lr", "0") == 0
    record = json.loads((pretrained / "same" / "init_from.json").read_text())
    assert record["initialised"] == {} and record["unused"] == []
    before, after = (
        load_file(pretrained / "model" / "best.safetensors"),
        load_file(pretrained / "same" / "best.safetensors"),
    )
    assert before.keys() == after.keys()
    assert all(before[name].equal(after[name]) for name in before)  # lr 0: one update changes nothing
    stored = ModelDir(pretrained / "same").config()
    assert stored["model"] == ModelDir(pretrained / "model").config()["model"]


def test_surgery_copies_matching_paths_and_records_the_rest(pretrained: Path, capsys) -> None:
    encoder = (
        "pos(layout=halves) -> repeat(1, res_d(mh_dot_self_att) -> norm -> res_d(ffl(act=swish, dropout=0)) -> norm)"
    )
    decoder = ("pos(layout=halves) -> repeat(1, res_d(aan) -> norm -> res_d(mh_dot_src_att(heads=4)) -> norm -> "
               "res_d(ffl(factor=3, act=swish, dropout=0)) -> norm)")  # fmt: skip
    flags = [
        "--encoder",
        encoder,
        "--decoder",
        decoder,
        "--max-updates",
        "1",
        "--checkpoint-interval",
        "1",
        "--lr",
        "0",
    ]
    assert train(pretrained, "surgery", *flags) == 0
    record = json.loads((pretrained / "surgery" / "init_from.json").read_text())
    aan = "decoder.layers.1.copies.0.layers.0.inner.layers.0."
    assert record["initialised"] and all(name.startswith(aan) for name in record["initialised"])
    assert f"{aan}qkv.weight" in record["unused"]  # the replaced self-attention
    assert "encoder.layers.1.copies.1.layers.0.inner.layers.0.qkv.weight" in record["unused"]  # the dropped block
    src_att = "decoder.layers.1.copies.0.layers.2.inner.layers.0.kv.weight"
    assert src_att in record["copied"]
    before, after = (
        load_file(pretrained / "model" / "best.safetensors"),
        load_file(pretrained / "surgery" / "best.safetensors"),
    )
    assert before[src_att].equal(after[src_att])
    err = capsys.readouterr().err
    assert f"initialised {aan}gate.weight (absent)" in err and "unused encoder.layers.1.copies.1" in err


def test_a_preset_is_surgery_at_the_models_sizes(pretrained: Path) -> None:
    """--preset with --init-from takes the preset's architecture and MODEL's sizes: the preset's own sizes (which the
    user did not give) were refused as '--d-model 256: --init-from keeps the model's d_model'."""
    from adlnmt.presets import get_preset

    assert train(pretrained, "preset", "--preset", "transformer-small", "--max-updates", "1") == 0
    ours, theirs = (ModelDir(pretrained / name).config()["model"] for name in ("preset", "model"))
    assert ours["encoder"] == get_preset("transformer-small").encoder
    sizes = ("d_model", "heads", "ff_factor")
    assert [ours[k] for k in sizes] == [theirs[k] for k in sizes]
    record = json.loads((pretrained / "preset" / "init_from.json").read_text())
    assert record["copied"] and record["initialised"]


def test_data_with_another_vocabulary_is_refused(pretrained: Path, demo_data: Path, capsys) -> None:
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(pretrained / "other"),
            "--init-from", str(pretrained / "model"), *TRAIN, "--max-updates", "1"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "prepared with another src vocabulary" in err and "adlnmt prepare --vocab-from" in err
    assert not (pretrained / "other" / "config.json").exists()


def test_an_export_is_refused_as_one(pretrained: Path, tmp_path: Path, capsys) -> None:
    """An export given to --init-from said "not a model directory (no config.json)", as if it were any folder."""
    export = tmp_path / "ct2"
    assert main(["export", "--model", str(pretrained / "model"), "--format", "ctranslate2", "--out", str(export)]) == 0
    capsys.readouterr()
    argv = ["train", "--data", str(pretrained / "data"), "--model", str(tmp_path / "ft"), "--init-from", str(export),
            *TRAIN, "--max-updates", "1"]  # fmt: skip
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"error: {export}: an export (export.json), not a model directory; --init-from starts from a model "
        "directory (adlnmt train's or adlnmt import's), e.g. the one exported\n"
    )
    assert not (tmp_path / "ft").exists()


def test_data_without_the_models_source_markers_is_refused(pretrained: Path, tmp_path: Path, capsys) -> None:
    """A model trained with a BOS before every source (--source-markers) fine-tuned on data without them read
    another input than it was trained on, without a word."""
    from interop.marian_fixtures import with_source_markers

    marked = with_source_markers(pretrained / "model", tmp_path / "marked")
    argv = ["train", "--data", str(pretrained / "data"), "--model", str(tmp_path / "ft"),
            "--init-from", str(marked), *TRAIN, "--max-updates", "1"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "prepared without --source-markers, but" in err and "adlnmt prepare --vocab-from" in err
    assert not (tmp_path / "ft" / "config.json").exists()


def test_resume_does_not_initialise_again(pretrained: Path, capsys) -> None:
    assert train(pretrained, "resumed", "--max-updates", "2", "--checkpoint-interval", "2") == 0
    first = (pretrained / "resumed" / "init_from.json").read_text()
    capsys.readouterr()
    assert train(pretrained, "resumed", "--max-updates", "4", "--checkpoint-interval", "2") == 0
    err = capsys.readouterr().err
    assert "resuming at update 2" in err and "init from" not in err
    assert (pretrained / "resumed" / "init_from.json").read_text() == first


def test_config_records_the_options_the_run_trains_with(pretrained: Path, capsys) -> None:
    """config.json's "train" entry of a run started with --init-from recorded the defaults of the sizes MODEL brings
    (d_model 512, heads 8 ...), not the model's; a run recorded so still resumes."""
    assert train(pretrained, "recorded", "--max-updates", "1", "--checkpoint-interval", "1") == 0
    files = ModelDir(pretrained / "recorded")
    stored = files.config()
    model, recorded = stored["model"], stored["train"]
    same = ("d_model", "heads", "dropout", "tie_output", "tie_source", "input_feeding", "init")
    expected = {name: model[name] for name in same}
    expected |= {"d_ff": model["ff_factor"] * model["d_model"], "max_positions": model["max_len"]}
    assert {name: recorded[name] for name in expected} == expected
    assert (recorded["d_model"], recorded["heads"]) != (512, 8)  # the tiny Marian model, not the defaults
    stored["train"] |= {"d_model": 512, "heads": 8, "d_ff": 2048, "dropout": 0.1, "max_positions": 1024}  # as before
    files.write_config(stored)
    capsys.readouterr()
    assert train(pretrained, "recorded", "--max-updates", "2", "--checkpoint-interval", "1") == 0
    assert "resuming at update 1" in capsys.readouterr().err
    assert {name: files.config()["train"][name] for name in expected} == expected  # rewritten true


def test_prepare_finds_the_vocabulary_where_model_directories_keep_it() -> None:
    from adlnmt.data.vocab_from import MODEL_VOCAB_DIR
    from adlnmt.store.names import VOCAB_DIR

    assert MODEL_VOCAB_DIR == VOCAB_DIR


@pytest.mark.parametrize(
    ("flag", "value"), [("--d-model", "64"), ("--heads", "4"), ("--d-ff", "1024"), ("--dropout", "0.3")]
)
def test_a_size_init_from_would_ignore_is_refused(pretrained: Path, flag: str, value: str, capsys) -> None:
    """MODEL's sizes are kept; a size option set to something else is an error naming it, never ignored."""
    assert train(pretrained, f"size{flag}", flag, value, "--max-updates", "1") == 2
    assert f"{flag} {value}: --init-from" in capsys.readouterr().err
    assert not (pretrained / f"size{flag}" / "config.json").exists()  # nothing started


@pytest.mark.parametrize(
    "flags",
    [["--input-feeding"], ["--learned-positions"], ["--max-positions", "64"], ["--var", "X=1"], ["--init", "fairseq"]],
)
def test_a_model_option_init_from_would_ignore_is_refused(pretrained: Path, flags: list[str], capsys) -> None:
    """MODEL's input feeding, position table, initialisation and variables (and ties) are kept: each of these options
    was accepted and silently ignored (config.json even recorded it)."""
    model = f"option{flags[0]}"
    assert train(pretrained, model, *flags, "--max-updates", "1") == 2
    assert f"{' '.join(flags)}: --init-from" in capsys.readouterr().err
    assert not (pretrained / model / "config.json").exists()  # nothing started


def test_separate_vocabularies_prepare_and_fine_tune(demo_data: Path, tmp_path: Path) -> None:
    """An import with separate vocabularies (target_vocab.json): prepare --vocab-from copies both sides'
    sentencepiece models (not joint) and train --init-from starts from its weights."""
    import_and_prepare(demo_data, tmp_path, seed=8, separate=True)
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    settings = ModelDir(tmp_path / "model").config()["model"]
    assert manifest["joint"] is False and settings["src_vocab_size"] == manifest["src_vocab_size"]
    assert settings["tgt_vocab_size"] == manifest["tgt_vocab_size"]
    assert manifest["spm"]["src"] != manifest["spm"]["tgt"]
    assert train(tmp_path, "tuned", "--max-updates", "1", "--checkpoint-interval", "1", "--lr", "0") == 0
    before, after = (
        load_file(tmp_path / "model" / "best.safetensors"),
        load_file(tmp_path / "tuned" / "best.safetensors"),
    )
    assert before.keys() == after.keys() and all(before[name].equal(after[name]) for name in before)
