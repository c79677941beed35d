"""``adlnmt export --format hf-marian``: MarianMTModel and MarianTokenizer load the export, which computes what the
adlnmt model computes and round-trips an imported checkpoint tensor for tensor; other shapes are refused by name."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.inference.batching import length_limit
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.search import translate_ids
from adlnmt.interop.marian_shape import match_model
from adlnmt.model import Seq2Seq
from adlnmt.model_config import ModelConfig
from adlnmt.store import ModelDir
from interop.marian_fixtures import SAMPLE, marian_dir, with_source_markers

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module", params=["one-vocab", "separate-vocabs"])
def exported(request, demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(request.param)
    separate = request.param == "separate-vocabs"
    marian_dir(demo_data / "corpus", root / "hf", seed=5, separate=separate, encoder_layers=1, decoder_layers=2)
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
    for name in ("vocab.json", "target_vocab.json"):
        assert (exported / "out" / name).is_file() is (exported / "hf" / name).is_file()
        if (exported / "hf" / name).is_file():
            assert json.loads((exported / "out" / name).read_text()) == json.loads((exported / "hf" / name).read_text())
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
    options = SearchOptions(beam=1, max_len_ratio=1.5, max_len_extra=5)
    found = translate_ids(model, encoded, options)
    target = (
        exported / "out" / ("target_vocab.json" if (exported / "out" / "target_vocab.json").is_file() else "vocab.json")
    )
    table = json.loads(target.read_text())
    for text, src, hyps in zip(texts, encoded, found, strict=True):
        ids = tokenizer(text)["input_ids"]
        assert ids == original(text)["input_ids"]
        limit = length_limit(len(src), options) + 1
        output = hf.generate(torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=limit)[0, 1:].tolist()
        ours = [table[piece] for piece in data.tgt_vocab.pieces(hyps[0].tokens)]
        assert output[: output.index(0) if 0 in output else None] == ours


def test_export_refuses_an_existing_out(exported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["export", "--model", str(exported / "model"), "--format", "hf-marian", "--out", str(exported / "out")]
    assert main(argv) == 2
    assert "exists; choose a new --out" in capsys.readouterr().err


def test_quantize_is_refused_before_anything_is_written(exported: Path, tmp_path: Path, capsys) -> None:
    """MarianMT exports are fp32: --quantize int8 was ignored (the weights byte-identical to an fp32 export)."""
    argv = ["export", "--model", str(exported / "model"), "--format", "hf-marian", "--out", str(tmp_path / "out")]
    assert main([*argv, "--quantize", "int8"]) == 2
    err = capsys.readouterr().err
    assert "--quantize int8 with --format hf-marian: MarianMT exports are fp32" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_source_markers_are_refused(exported: Path, tmp_path: Path, capsys) -> None:
    """Data prepared with --source-markers puts a BOS before every source; MarianMT's sources have none, so the
    export would translate differently."""
    model = with_source_markers(exported / "model", tmp_path / "model")
    argv = ["export", "--model", str(model), "--format", "hf-marian", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "MarianMT has no counterpart of source markers" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_an_out_inside_a_file_is_named(exported: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "afile").write_text("")
    out = tmp_path / "afile" / "x"
    assert main(["export", "--model", str(exported / "model"), "--format", "hf-marian", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out}: cannot write the export: {tmp_path / 'afile'} is not a folder" in err and ".tmp-" not in err


@pytest.mark.parametrize(("out", "where"), [("model/hf", "inside"), ("model/sub/../hf", "inside"),
                                            ("model/.", "the folder")])  # fmt: skip
def test_an_out_inside_the_model_folder_is_refused(
    out: str, where: str, exported: Path, tmp_path: Path, capsys
) -> None:
    """``--out`` inside the model folder was accepted: the export wrote into the folder it read."""
    model = tmp_path / "model"
    shutil.copytree(exported / "model", model)
    before = sorted(p.name for p in model.iterdir())
    assert main(["export", "--model", str(model), "--format", "hf-marian", "--out", str(tmp_path / out)]) == 2
    assert (f"error: {tmp_path / out}: {where} {model}, which the export reads (writing there would change it); "
            "choose a --out outside it") in capsys.readouterr().err  # fmt: skip
    assert sorted(p.name for p in model.iterdir()) == before


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


def test_separate_vocabularies_of_different_sizes_export_with_fillers(demo_data: Path, tmp_path: Path) -> None:
    """A native model with separate vocabularies of different sizes: the smaller side's vocab.json is filled up to
    MarianMT's one size with pieces segmentation never produces (zero rows, never predicted); every real id's
    logit equals adlnmt's."""
    from adlnmt.data.data_dir import DataDir
    from adlnmt.data.vocab import Vocab, train_sentencepiece
    from adlnmt.interop.hf_export import marian_writer
    from adlnmt.interop.marian_vocab import FILLER
    from adlnmt.interop.staging import write_new_directory

    corpus = demo_data / "corpus"
    vocabs = {side: Vocab.load(train_sentencepiece([corpus / f"train.{side}"], tmp_path / side, size))
              for side, size in (("src", 70), ("tgt", 90))}  # fmt: skip
    assert vocabs["src"].size < vocabs["tgt"].size
    encoder = "pos(layout=halves) -> repeat(1, res_d(mh_dot_self_att) -> norm -> res_d(ffl(act=relu)) -> norm)"
    decoder = ("pos(layout=halves) -> repeat(2, res_d(mh_dot_self_att) -> norm -> res_d(mh_dot_src_att) -> norm "
               "-> res_d(ffl(act=relu)) -> norm)")  # fmt: skip
    torch.manual_seed(0)
    config = ModelConfig(encoder, decoder, vocabs["src"].size, vocabs["tgt"].size, d_model=16, heads=2)
    model = Seq2Seq(config).eval()
    with torch.no_grad():
        model.output.bias.normal_()
    write_new_directory(tmp_path / "out", marian_writer(model, DataDir(tmp_path, {}, vocabs["src"], vocabs["tgt"])),
                        "the export")  # fmt: skip
    tables = {side: json.loads((tmp_path / "out" / name).read_text())
              for side, name in (("src", "vocab.json"), ("tgt", "target_vocab.json"))}  # fmt: skip
    assert len(tables["src"]) == len(tables["tgt"]) == vocabs["tgt"].size - 1
    fillers = [tables["src"][FILLER.format(k)] for k in range(vocabs["tgt"].size - vocabs["src"].size)]
    hf = transformers.MarianMTModel.from_pretrained(tmp_path / "out").eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(tmp_path / "out")
    lines = [(corpus / f"valid.{side}").read_text().splitlines()[:4] for side in ("src", "tgt")]
    for source, target in zip(*lines, strict=True):
        src, tgt = [*vocabs["src"].encode(source), 3], vocabs["tgt"].encode(target)
        assert tokenizer(source)["input_ids"] == [tables["src"][p] for p in vocabs["src"].pieces(src)[:-1]] + [0]
        marian_tgt = [tables["tgt"][p] for p in vocabs["tgt"].pieces(tgt)]
        pad = hf.config.pad_token_id
        with torch.no_grad():
            ours = model(torch.tensor([src]), torch.tensor([[2, *tgt]]))[0]
            theirs = hf(input_ids=torch.tensor([tokenizer(source)["input_ids"]]),
                        decoder_input_ids=torch.tensor([[pad, *marian_tgt]])).logits[0]  # fmt: skip
        real = list(range(4, vocabs["tgt"].size))
        assert torch.allclose(ours[:, [1, 3, *real]], theirs[:, [1, 0, *(tables["tgt"][p]
                              for p in vocabs["tgt"].pieces(real))]], atol=1e-5)  # fmt: skip
        assert (
            hf(input_ids=torch.tensor([[*fillers, 0]]), decoder_input_ids=torch.tensor([[pad]])).logits.isfinite().all()
        )
