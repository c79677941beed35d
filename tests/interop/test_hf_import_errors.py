"""Bad MarianMT directories: one clear error each (exit status 2, the file and what is wrong), and no model directory
left behind."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from adlnmt.cli import main
from interop.marian_fixtures import marian_dir

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def marian(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bad") / "hf"
    marian_dir(demo_data / "corpus", out, seed=3)
    return out


def edit_json(name: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(directory: Path) -> None:
        content = json.loads((directory / name).read_text())
        change(content)
        (directory / name).write_text(json.dumps(content))

    return edit


def edit_weights(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(directory: Path) -> None:
        tensors = load_file(directory / "model.safetensors")
        change(tensors)
        save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})

    return edit


LAYER = "model.encoder.layers.0.fc1.weight"
CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "missing config": (lambda d: (d / "config.json").unlink(), "config.json: missing"),
    "damaged config": (lambda d: (d / "config.json").write_text("{ not json"), "config.json: damaged"),
    "unsupported key": (edit_json("config.json", lambda c: c.update(normalize_before=True)),
                        "unsupported config key normalize_before = True"),
    "unknown key": (edit_json("config.json", lambda c: c.update(rope_theta=10000)),
                    "unsupported config key 'rope_theta'"),
    "tanh gelu": (edit_json("config.json", lambda c: c.update(activation_function="gelu_new")),
                  "unsupported activation_function 'gelu_new'"),
    "missing weights": (lambda d: (d / "model.safetensors").unlink(), "no weights (model.safetensors or"),
    "damaged weights": (lambda d: (d / "model.safetensors").write_bytes(b"\x10\x00garbage"),
                        "model.safetensors: damaged"),
    "shape mismatch": (edit_weights(lambda t: t.update({LAYER: torch.zeros(5, 16)})),
                       f"the tensor {LAYER} has shape [5, 16], the configuration implies [32, 16]"),
    "missing tensor": (edit_weights(lambda t: t.pop(LAYER)), f"the tensor {LAYER} is missing"),
    "unused tensor": (edit_weights(lambda t: t.update({"model.encoder.layernorm_embedding.weight": torch.ones(16)})),
                      "1 tensors have no place in a MarianMT model as configured: model.encoder.layernorm_embedding"),
    "no source.spm": (lambda d: (d / "source.spm").unlink(), "source.spm: missing (a MarianMT tokenizer needs"),
    "damaged target.spm": (lambda d: (d / "target.spm").write_bytes(b"\xff\xfe no model"),
                           "target.spm: not a sentencepiece"),
    "damaged vocab.json": (lambda d: (d / "vocab.json").write_text("[1, 2]"), "vocab.json: malformed"),
    "vocab.json of another model": (edit_json("vocab.json", lambda v: v.pop("</s>")), "vocab.json: its"),
    "separate_vocabs without target_vocab.json": (
        edit_json("tokenizer_config.json", lambda c: c.update(separate_vocabs=True)),
        "target_vocab.json: missing (a MarianMT tokenizer needs vocab.json, source.spm, target.spm and, with "
        "separate_vocabs, target_vocab.json)"),
    "separate_vocabs with shared embeddings": (
        lambda d: (edit_json("tokenizer_config.json", lambda c: c.update(separate_vocabs=True))(d),
                   (d / "target_vocab.json").write_text((d / "vocab.json").read_text())),
        "share_encoder_decoder_embeddings is true, but the tokenizer has separate vocabularies"),
    "decoder_vocab_size of one vocab.json": (edit_json("config.json", lambda c: c.update(decoder_vocab_size=99)),
                                             "decoder_vocab_size 99 differs from vocab_size"),
    "pad id outside vocab.json": (edit_json("config.json", lambda c: c.update(pad_token_id=500,
                                                                               decoder_start_token_id=500)),
                                  "pad (500) ids must be ids of its"),
    "zero d_model": (edit_json("config.json", lambda c: c.update(d_model=0)),
                     "config.json: d_model: must be an integer ≥ 1, got 0"),
    "no positions": (edit_json("config.json", lambda c: c.update(max_position_embeddings=0)),
                     "config.json: max_position_embeddings: must be an integer ≥ 2, got 0"),
    "dropout above 1": (edit_json("config.json", lambda c: c.update(dropout=2.0)),
                        "config.json: dropout: must be a number in [0, 1), got 2.0"),
    "NaN attention dropout": (edit_json("config.json", lambda c: c.update(attention_dropout=float("nan"))),
                              "config.json: attention_dropout: must be a number in [0, 1), got nan"),
    "heads not dividing d_model": (edit_json("config.json", lambda c: c.update(encoder_attention_heads=3)),
                                   "config.json: encoder_attention_heads: 3 does not divide d_model 16"),
    "scale_embedding as a string": (edit_json("config.json", lambda c: c.update(scale_embedding="false")),
                                    "config.json: scale_embedding: must be true or false, got 'false'"),
    "tie_word_embeddings as a string": (edit_json("config.json", lambda c: c.update(tie_word_embeddings="no")),
                                        "config.json: tie_word_embeddings: must be true or false, got 'no'"),
    "separate_vocabs as a string": (edit_json("tokenizer_config.json", lambda c: c.update(separate_vocabs="false")),
                                    "tokenizer_config.json: separate_vocabs: must be true or false, got 'false'"),
    "pad id not an integer": (edit_json("config.json", lambda c: c.update(pad_token_id=1.5)),
                              "config.json: pad_token_id: must be an integer ≥ 0, got 1.5"),
    "NaN weights": (edit_weights(lambda t: t[LAYER].__setitem__((0, 0), float("nan"))),
                    f"model.safetensors: the tensor {LAYER} holds NaN or infinite values"),
    "integer weights": (edit_weights(lambda t: t.update({LAYER: t[LAYER].to(torch.int32)})),
                        f"model.safetensors: the tensor {LAYER} holds int32, not floating-point weights"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_bad_directory_is_one_clear_error(case: str, marian: Path, tmp_path: Path, capsys) -> None:
    damage, expected = CASES[case]
    source = tmp_path / "hf"
    shutil.copytree(marian, source)
    damage(source)
    assert main(["import", str(source), "--from", "hf-marian", "--out", str(tmp_path / "model")]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # nothing half-written


def test_existing_out_is_refused(marian: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "model").mkdir()
    assert main(["import", str(marian), "--from", "hf-marian", "--out", str(tmp_path / "model")]) == 2
    assert "exists; choose a new --out" in capsys.readouterr().err
    assert not any((tmp_path / "model").iterdir())


@pytest.mark.parametrize(("out", "where"), [("hf/adlnmt", "inside"), ("hf/sub/../adlnmt", "inside"),
                                            ("hf/.", "the folder")])  # fmt: skip
def test_an_out_inside_the_imported_folder_is_refused(
    out: str, where: str, marian: Path, tmp_path: Path, capsys
) -> None:
    """``--out`` inside the MarianMT folder was accepted: the import wrote into the folder it read."""
    source = tmp_path / "hf"
    shutil.copytree(marian, source)
    before = sorted(p.name for p in source.iterdir())
    assert main(["import", str(source), "--from", "hf-marian", "--out", str(tmp_path / out)]) == 2
    assert (f"error: {tmp_path / out}: {where} {source}, which an import reads (writing there would change it); "
            "choose a --out outside it") in capsys.readouterr().err  # fmt: skip
    assert sorted(p.name for p in source.iterdir()) == before


def test_pieces_missing_from_vocab_json_read_as_unk(demo_data: Path, tmp_path: Path) -> None:
    """A piece of the .spm models that vocab.json lacks: MarianTokenizer maps it to <unk>; so does the import."""
    import transformers

    from adlnmt.store import ModelDir

    marian_dir(demo_data / "corpus", tmp_path / "hf", seed=4, drop=("▁the",))
    assert main(["import", str(tmp_path / "hf"), "--from", "hf-marian", "--out", str(tmp_path / "model")]) == 0
    stored = ModelDir(tmp_path / "model").config()["imported"]
    assert stored["pieces_missing_from_vocab_json"] == ["▁the"]
    _, data, _ = ModelDir(tmp_path / "model").load_model("best")
    tokenizer = transformers.MarianTokenizer.from_pretrained(tmp_path / "hf")
    text = "the dog sees the cat"
    ours = data.encode_source(text)
    unk = tokenizer.get_vocab()["<unk>"]
    assert unk in tokenizer(text)["input_ids"]
    assert len(ours) == len(tokenizer(text)["input_ids"])


def test_a_pytorch_model_bin_imports_as_its_safetensors(marian: Path, tmp_path: Path) -> None:
    """Older checkpoints store ``pytorch_model.bin`` (a pickle, read with ``weights_only``): the same model."""
    source = tmp_path / "hf"
    shutil.copytree(marian, source)
    torch.save(load_file(source / "model.safetensors"), source / "pytorch_model.bin")
    (source / "model.safetensors").unlink()
    for name, directory in (("bin", source), ("safetensors", marian)):
        assert main(["import", str(directory), "--from", "hf-marian", "--out", str(tmp_path / name)]) == 0
    ours, theirs = (load_file(tmp_path / name / "best.safetensors") for name in ("bin", "safetensors"))
    assert ours.keys() == theirs.keys() and all(ours[key].equal(theirs[key]) for key in ours)


def test_a_pickle_with_code_is_refused(marian: Path, tmp_path: Path, capsys) -> None:
    """``weights_only``: a pytorch_model.bin that would run code when unpickled is an error, not executed."""
    source = tmp_path / "hf"
    shutil.copytree(marian, source)
    (source / "model.safetensors").unlink()
    torch.save(
        {"weights": load_file(marian / "model.safetensors"), "hook": shutil.rmtree}, source / "pytorch_model.bin"
    )
    assert main(["import", str(source), "--from", "hf-marian", "--out", str(tmp_path / "model")]) == 2
    err = capsys.readouterr().err
    assert "pytorch_model.bin: refused: it holds Python objects besides tensors (shutil.rmtree)" in err
    assert "Traceback" not in err
    assert "weights_only` set to `False`" not in err  # torch's advice to load it unsafely, passed on as it was
    assert not (tmp_path / "model").exists()


def test_a_damaged_pickle_is_damaged_not_code(marian: Path, tmp_path: Path, capsys) -> None:
    """A pytorch_model.bin that is no pickle at all fails weights_only loading too: it is damaged, with torch's
    reason but without its advice to load it with weights_only=False."""
    source = tmp_path / "hf"
    shutil.copytree(marian, source)
    (source / "model.safetensors").unlink()
    (source / "pytorch_model.bin").write_bytes(b"garbage")
    assert main(["import", str(source), "--from", "hf-marian", "--out", str(tmp_path / "model")]) == 2
    err = capsys.readouterr().err
    assert "pytorch_model.bin: damaged (not a PyTorch checkpoint" in err and "weights_only` set to" not in err


# an unwritable file fails only when the diagram is written, after Graphviz's `dot` drew it (skipped without it)
UNWRITABLE = pytest.param(
    "/proc/adlnmt-test.svg",
    marks=pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed"),
)


@pytest.mark.parametrize("where", ["x.txt", UNWRITABLE, "folder.svg"])
def test_a_bad_diagram_leaves_nothing_written(where: str, marian: Path, tmp_path: Path, capsys) -> None:
    """The import and its diagram: an unknown suffix or a folder is refused before the import, an unwritable file
    after it (then its model directory goes too), so the same command with a good --diagram then succeeds."""
    (tmp_path / "folder.svg").mkdir()
    diagram = where if where.startswith("/") else str(tmp_path / where)
    argv = ["import", str(marian), "--from", "hf-marian", "--out", str(tmp_path / "model")]
    assert main([*argv, "--diagram", diagram]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {diagram}: ") and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.svg"]


def test_an_out_inside_a_file_is_named(marian: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "afile").write_text("")
    out = tmp_path / "afile" / "x"
    assert main(["import", str(marian), "--from", "hf-marian", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out}: cannot write an import: {tmp_path / 'afile'} is not a folder" in err and ".tmp-" not in err
