"""CTranslate2 export: greedy output identical to PyTorch on Transformer models; other ADL refused by layer."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlnmt.errors import UserError
from adlnmt.export.ctranslate2_spec import unsupported_layer
from adlnmt.export.directory import Source
from adlnmt.export.formats import export_model
from adlnmt.inference.engines import pick_engine
from adlnmt.inference.search import SearchOptions, length_penalty, translate_ids
from adlnmt.inference.translator import Translator
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.store import ModelDir

from .conftest import FAMILIES, demo_sources

pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'adlnmt[ct2]'")


def export_ct2(model_dir: Path, out: Path, quantize: str = "none") -> tuple[Seq2Seq, Translator]:
    model, data, max_len = ModelDir(model_dir).load_model("best")
    export_model(Source(model.eval(), data, max_len), out, "ctranslate2", quantize)
    return model, Translator.load(out, engine="ctranslate2")


@pytest.mark.parametrize("family", ["transformer", "post-norm"])
def test_ctranslate2_greedy_is_identical(tiny_models, demo_data: Path, tmp_path: Path, family: str) -> None:
    model, translator = export_ct2(tiny_models[family], tmp_path / "ct2")
    sources = demo_sources(translator, demo_data, 16)
    assert translator.engine is not None
    expected = [hyps[0].tokens for hyps in translate_ids(model, sources, SearchOptions(beam=1))]
    found = [hyps[0].tokens for hyps in translator.engine.translate_ids(sources, SearchOptions(beam=1))]
    assert found == expected
    beam = SearchOptions(beam=5, nbest=5)  # ranked by the GNMT length penalty, as the PyTorch search ranks
    found_beam = translator.engine.translate_ids(sources, beam)
    expected_beam = translate_ids(model, sources, beam)
    same = [a[0].tokens == b[0].tokens for a, b in zip(found_beam, expected_beam, strict=True)]
    for found_hyps, expected_hyps in zip(found_beam, expected_beam, strict=True):  # log-probs recovered
        log_probs = {tuple(h.tokens): h.log_prob for h in expected_hyps}
        for h in found_hyps:
            if tuple(h.tokens) in log_probs and len(h.tokens) < 20:  # ended by EOS, not at the batch's length limit
                assert h.log_prob == pytest.approx(log_probs[tuple(h.tokens)], rel=1e-2)
    assert sum(same) >= len(sources) // 2  # beam limits differ on outputs that run to the length limit
    for hyps in found_beam:
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            assert h.score == pytest.approx(h.log_prob / length_penalty(len(h.tokens) + 1, 1.0))


def test_ctranslate2_int8_translates(tiny_models, demo_data: Path, tmp_path: Path) -> None:
    _, translator = export_ct2(tiny_models["transformer"], tmp_path / "ct2", "int8")
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:6]
    assert all(translator.translate(lines, SearchOptions(beam=2)))
    with pytest.raises(UserError, match="no alignments"):
        translator.search(lines, SearchOptions(alignments=True))


REFUSED = {
    "rnn": "decoder layer 'rnn",
    "cnn": "decoder layer 'cnn",
    "aan": "decoder layer 'aan'",
    "none": "decoder layer 'mh_dot_src_att",
    "comet": "decoder layer 'comet_conv",
    "mixed": "decoder layer 'rnn(cell=gru)'",
}


@pytest.mark.parametrize("family", list(REFUSED))
def test_other_adl_is_refused_naming_the_first_layer(family: str) -> None:
    encoder, decoder, _ = FAMILIES[family]
    model = Seq2Seq(ModelConfig(encoder, decoder, 50, 50, d_model=32, heads=4))
    reason = unsupported_layer(model)
    assert reason is not None and REFUSED[family] in reason and "CTranslate2's Transformer" in reason
    with pytest.raises(UserError, match="cannot express"):
        export_model(Source(model, None, 10), Path("/nonexistent"), "ctranslate2")  # type: ignore[arg-type]


def test_auto_picks_ctranslate2_for_transformers_only(capsys) -> None:
    transformer = Seq2Seq(ModelConfig(*FAMILIES["transformer"][:2], 50, 50, d_model=32, heads=4))
    aan = Seq2Seq(ModelConfig(*FAMILIES["aan"][:2], 50, 50, d_model=32, heads=4))
    assert pick_engine("auto", transformer, "fp32") == "ctranslate2"
    assert "engine auto: ctranslate2 (the fastest measured for Transformer models in fp32)" in capsys.readouterr().err
    assert pick_engine("auto", transformer, "int8") == pick_engine("auto", aan, "fp32") == "torch"
    printed = capsys.readouterr().err
    assert "engine auto: torch (the fastest measured in int8)" in printed
    assert "engine auto: torch (CTranslate2's Transformer cannot express decoder layer 'aan'" in printed
    assert pick_engine("auto", transformer, torch_only=["alignments", "--workers"]) == "torch"
    assert "engine auto: torch (only the torch engine gives alignments, --workers)" in capsys.readouterr().err
    assert pick_engine("torch", transformer) == "torch"
