"""``adlnmt export --format hf-marian``: MarianMTModel and MarianTokenizer load the export, which computes what the
adlnmt model computes and round-trips an imported checkpoint tensor for tensor; other shapes are refused by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.search import translate_ids
from adlnmt.interop.marian_shape import match_model
from adlnmt.model import Seq2Seq
from adlnmt.model_config import ModelConfig
from adlnmt.store import ModelDir
from interop.marian_fixtures import SAMPLE, marian_dir

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def exported(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("export")
    marian_dir(demo_data / "corpus", root / "hf", seed=5, encoder_layers=1, decoder_layers=2)
    assert main(["import", str(root / "hf"), "--from", "hf-marian", "--out", str(root / "model")]) == 0
    argv = ["export", "--model", str(root / "model"), "--format", "hf-marian", "--out", str(root / "out")]
    assert main(argv) == 0
    return root


def test_export_round_trips_the_imported_checkpoint(exported: Path) -> None:
    original, written = (
        load_file(exported / "hf" / "model.safetensors"),
        load_file(exported / "out" / "model.safetensors"),
    )
    assert original.keys() == written.keys()
    pad = original["final_logits_bias"].size(1) - 1
    for name, tensor in original.items():
        if name == "final_logits_bias":  # the pad class: -100 (never emitted), MarianMT's converter wrote 0
            assert torch.equal(tensor[0, :pad], written[name][0, :pad]) and written[name][0, pad] < -50
        else:
            assert torch.equal(tensor, written[name]), name


def test_transformers_load_and_generate_the_same_tokens(exported: Path, demo_data: Path) -> None:
    hf = transformers.MarianMTModel.from_pretrained(exported / "out").eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(exported / "out")
    original = transformers.MarianTokenizer.from_pretrained(exported / "hf")
    model, data, _ = ModelDir(exported / "model").load_model("best")
    texts = (demo_data / "corpus" / "valid.src").read_text(encoding="utf-8").splitlines()[:SAMPLE]
    encoded = [data.encode_source(text) for text in texts]
    found = translate_ids(model, encoded, SearchOptions(beam=1, max_len_ratio=1.5, max_len_extra=5))
    table = tokenizer.get_vocab()
    for text, hyps in zip(texts, found, strict=True):
        ids = tokenizer(text)["input_ids"]
        assert ids == original(text)["input_ids"]
        output = hf.generate(torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=200)[0, 1:].tolist()
        ours = [table[piece] for piece in data.tgt_vocab.pieces(hyps[0].tokens)]
        assert output[: output.index(0) if 0 in output else None] == ours


def test_export_refuses_an_existing_out(exported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["export", "--model", str(exported / "model"), "--format", "hf-marian", "--out", str(exported / "out")]
    assert main(argv) == 2
    assert "exists; choose a new --out" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("encoder", "decoder", "named"),
    [
        ("pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm", None, "encoder layer 'pos'"),
        ("pos(layout=halves) -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm", None,
         "encoder layer 'res_nd(mh_dot_self_att)'"),
        (None, "pos(layout=halves) -> repeat(1, res_d(aan) -> norm -> res_d(mh_dot_src_att) -> norm -> res_d(ffl) "
         "-> norm)",
         "decoder layer 'aan'"),
        (None, "pos(layout=halves) -> repeat(1, res_d(cnn) -> norm -> res_d(mh_dot_src_att) -> norm -> res_d(ffl) "
         "-> norm)", "decoder layer 'cnn'"),
    ],
)  # fmt: skip
def test_other_architectures_are_refused_naming_the_first_layer(encoder: str | None, decoder: str | None,
                                                               named: str) -> None:  # fmt: skip
    marian_encoder = "pos(layout=halves) -> repeat(1, res_d(mh_dot_self_att) -> norm -> res_d(ffl) -> norm)"
    marian_decoder = ("pos(layout=halves) -> repeat(1, res_d(mh_dot_self_att) -> norm -> res_d(mh_dot_src_att) -> norm "
                      "-> res_d(ffl) -> norm)")  # fmt: skip
    config = ModelConfig(encoder or marian_encoder, decoder or marian_decoder, 20, 20, d_model=16, heads=2)
    with pytest.raises(UserError, match=re.escape(f"MarianMT has no counterpart of {named} (expected")):
        match_model(Seq2Seq(config))


def test_an_imported_model_exports_to_onnx_and_translates_alike(exported: Path, demo_data: Path, tmp_path: Path,
                                                                  capsys) -> None:  # fmt: skip
    pytest.importorskip("onnxruntime")
    source = tmp_path / "in.txt"
    source.write_text("\n".join((demo_data / "corpus" / "valid.src").read_text().splitlines()[:5]) + "\n")
    outputs = []
    assert main(["export", "--model", str(exported / "model"), "--format", "onnx", "--out", str(tmp_path / "x")]) == 0
    for argv in (["--model", str(exported / "model")], ["--model", str(tmp_path / "x"), "--engine", "onnxruntime"]):
        capsys.readouterr()
        assert main(["translate", *argv, "--input", str(source), "--beam", "1"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 5
