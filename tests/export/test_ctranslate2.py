"""CTranslate2 export: greedy output identical to PyTorch on Transformer models; other ADL refused by layer."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.export.directory import Source
from adlnmt.export.formats import export_model
from adlnmt.inference.ctranslate2_shape import unsupported_layer
from adlnmt.inference.engines import auto_note, check_model_dir_engine
from adlnmt.inference.search import SearchOptions, length_penalty, translate_ids
from adlnmt.inference.translator import Translator
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.store import ModelDir
from test_search import DECODERS, ENCODER

from .conftest import FAMILIES, LONG_SOURCE, SHORT_TABLE_ENCODER, demo_sources, short_table_export

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


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_workers_search_batches_in_parallel_with_identical_output(tiny_models, demo_data: Path, tmp_path: Path,
                                                                   quantize: str) -> None:  # fmt: skip
    _, translator = export_ct2(tiny_models["transformer"], tmp_path / "ct2", quantize)
    sources = demo_sources(translator, demo_data, 24)
    assert translator.engine is not None
    for beam in (1, 4):
        alone = translator.engine.translate_ids(sources, SearchOptions(beam=beam, nbest=beam, batch_size=3))
        parallel = translator.engine.translate_ids(sources, SearchOptions(beam=beam, nbest=beam, batch_size=3,
                                                                          workers=2))  # fmt: skip
        assert parallel == alone  # tokens, log-probabilities and scores, in input order
    assert translator.engine.translator_for(SearchOptions(workers=2)).num_translators == 2
    loaded = Translator.load(tmp_path / "ct2", options=SearchOptions(workers=2))  # loaded once, for its searches
    assert loaded.engine is not None and loaded.engine.translator.num_translators == 2
    assert loaded.engine.translator_for(SearchOptions(workers=2)) is loaded.engine.translator


def test_ctranslate2_int8_translates(tiny_models, demo_data: Path, tmp_path: Path) -> None:
    _, translator = export_ct2(tiny_models["transformer"], tmp_path / "ct2", "int8")
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:6]
    assert all(translator.translate(lines, SearchOptions(beam=2)))
    with pytest.raises(UserError, match=r"^alignments need the torch or onnxruntime engine, not ctranslate2$"):
        translator.search(lines, SearchOptions(alignments=True))


REFUSED = {
    "rnn": "decoder layer 'rnn",
    "cnn": "decoder layer 'cnn",
    "aan": "decoder layer 'aan'",
    "ssru": "decoder layer 'ssru'",
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
    assert "--format" not in reason  # an export flag: the export command adds it, not translate --engine auto
    with pytest.raises(UserError, match=r"cannot express .*; export it with --format onnx instead$"):
        export_model(Source(model, None, 10), Path("/nonexistent"), "ctranslate2")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("decoder", "named"),
    [
        ("repeat(2, rnn) -> mh_dot_src_att", "decoder layer 'rnn' (expected pos or learn_pos first)"),
        ("pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att)) -> norm",
         "decoder layer 'res_nd(mh_dot_src_att)' (expected res_nd(ffl) after it)"),
    ],
)  # fmt: skip
def test_a_refusal_names_the_layer_inside_a_repeat(decoder: str, named: str) -> None:
    reason = unsupported_layer(Seq2Seq(ModelConfig(ENCODER, decoder, 50, 50, d_model=32, heads=4)))
    assert reason is not None and named in reason and "repeat" not in reason


def test_a_refused_export_leaves_no_directory(tmp_path: Path) -> None:
    model = Seq2Seq(ModelConfig(*FAMILIES["aan"][:2], 50, 50, d_model=32, heads=4))
    with pytest.raises(UserError, match="cannot express decoder layer 'aan'"):
        export_model(Source(model, None, 10), tmp_path / "new" / "deeper" / "ct2", "ctranslate2")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_auto_runs_a_model_directory_on_torch_and_names_the_export_for_ctranslate2() -> None:
    transformer = Seq2Seq(ModelConfig(*FAMILIES["transformer"][:2], 50, 50, d_model=32, heads=4))
    aan = Seq2Seq(ModelConfig(*FAMILIES["aan"][:2], 50, 50, d_model=32, heads=4))
    model_dir = Path("runs/m")
    for engine in ("auto", "torch"):
        check_model_dir_engine(engine, model_dir)
    assert auto_note(transformer, model_dir) == (
        "it runs model directories; the faster ctranslate2 engine runs an export of this one: "
        "`adlnmt export --model runs/m --format ctranslate2 --out DIR`, then --model DIR"
    )
    assert auto_note(transformer, model_dir, "int8").endswith(
        "`adlnmt export --model runs/m --format ctranslate2 --quantize int8 --out DIR`, then --model DIR"
    )
    assert auto_note(transformer, model_dir, "bf16") == "the fastest measured in bf16"
    assert auto_note(aan, model_dir).startswith("CTranslate2's Transformer cannot express decoder layer 'aan'")
    wanted = SearchOptions(alignments=True, workers=2)
    assert auto_note(transformer, model_dir, options=wanted) == "only the torch engine gives --alignments"
    assert auto_note(transformer, model_dir, device="cuda") == "only the torch engine gives cuda"
    for engine, export_format in (("ctranslate2", "ctranslate2"), ("onnxruntime", "onnx")):
        with pytest.raises(UserError) as refused:
            check_model_dir_engine(engine, model_dir)
        assert str(refused.value) == (
            f"runs/m is a model directory; the {engine} engine runs an export of it: run `adlnmt export --model "
            f"runs/m --format {export_format} --out DIR`, then translate with --model DIR"
        )
    with pytest.raises(UserError, match="unknown engine 'tvm'"):
        check_model_dir_engine("tvm", model_dir)


def test_translate_auto_on_a_model_directory_is_torch(tiny_models, demo_data: Path, tmp_path: Path, capsys) -> None:
    model_dir = tiny_models["transformer"]
    source = demo_data / "corpus" / "test.src"
    outputs = {}
    for engine in ("torch", "auto"):
        argv = ["translate", "--model", str(model_dir), "--input", str(source), "--beam", "2", "--engine", engine]
        assert main(argv) == 0
        outputs[engine] = capsys.readouterr()
    assert outputs["auto"].out == outputs["torch"].out
    note = (f"engine auto: torch (it runs model directories; the faster ctranslate2 engine runs an export of this one: "
            f"`adlnmt export --model {model_dir} --format ctranslate2 --out DIR`, then --model DIR)")  # fmt: skip
    assert note in outputs["auto"].err
    assert main(["translate", "--model", str(model_dir), "--input", str(source), "--engine", "ctranslate2"]) == 2
    assert f"`adlnmt export --model {model_dir} --format ctranslate2 --out DIR`" in capsys.readouterr().err


def test_a_ctranslate2_export_stays_within_its_position_tables(demo_data: Path, tmp_path: Path) -> None:
    """The export stores one position table per side with the positions its learned table covers, so an
    untrained model with learned decoder positions (12) and a sinusoidal encoder raised 'No position encodings are
    defined for positions >= 12' (a traceback) on a long source, a long output or a long target to score. Sources
    are cut to the table (with the usual warning), outputs and scored targets stop within it, as on torch."""
    from adlnmt.analysis.forced import PairScorer

    model, translator, sources = short_table_export(demo_data / "data", tmp_path / "ct2", "ctranslate2")
    assert len(sources[0]) > 12  # the sinusoidal encoder reads it whole, as on torch
    options = SearchOptions(beam=1, max_len_extra=40)  # an untrained model runs to the length limit
    assert translator.engine is not None
    found = translator.engine.translate_ids(sources, options)
    assert [h[0].tokens for h in found] == [h[0].tokens for h in translate_ids(model, sources, options)]
    assert max(len(h[0].tokens) for h in found) == 11
    assert all(hyps for hyps in translator.engine.translate_ids(sources, SearchOptions(beam=3, max_len_extra=40)))
    scored = PairScorer(translator).score([LONG_SOURCE], ["Lo rey " * 20])
    assert len(scored[0].pieces) == 12  # the target cut to 11 pieces, + EOS


def test_each_side_of_a_ctranslate2_export_keeps_its_own_positions(demo_data: Path, tmp_path: Path) -> None:
    """An encoder's learned table (12) beside a sinusoidal decoder: the export gave both sides the 12 positions of
    the smallest table, so outputs stopped at 11 tokens where torch's ran on to the search's length limit (and a
    decoder's short table cut the sources). Each side now has its own table: sources are cut to the encoder's, and
    outputs are token for token torch's."""
    model, translator, sources = short_table_export(
        demo_data / "data", tmp_path / "ct2", "ctranslate2", SHORT_TABLE_ENCODER, DECODERS["transformer"]
    )
    assert len(sources[0]) == 12  # cut to 11 pieces + EOS
    options = SearchOptions(beam=1, max_len_extra=40)  # an untrained model runs to the length limit
    assert translator.engine is not None
    found = translator.engine.translate_ids(sources, options)
    assert [h[0].tokens for h in found] == [h[0].tokens for h in translate_ids(model, sources, options)]
    assert max(len(h[0].tokens) for h in found) > 11


def test_a_ctranslate2_output_cut_at_its_own_limit_gets_its_own_log_prob_once(demo_data: Path, tmp_path: Path) -> None:
    """CTranslate2 searches a batch up to its longest sentence's limit; a shorter sentence's hypotheses were cut to
    its own limit but kept the log-probability (and rank) of the uncut hypothesis, and hypotheses equal once cut
    came back several times in one n-best list. A cut output now has its own log-probability, EOS at the limit
    included (the PyTorch search's), and each output is given once."""
    model, translator, sources = short_table_export(
        demo_data / "data", tmp_path / "ct2", "ctranslate2", SHORT_TABLE_ENCODER, DECODERS["transformer"]
    )
    options = SearchOptions(beam=3, nbest=3)  # an untrained model runs to the length limit
    assert translator.engine is not None
    found = translator.engine.translate_ids(sources, options)
    expected = translate_ids(model, sources, options)
    limits = [translator.engine.length_limit(len(source), options) for source in sources]
    checked = 0
    for limit, found_hyps, expected_hyps in zip(limits, found, expected, strict=True):
        assert len({tuple(h.tokens) for h in found_hyps}) == len(found_hyps)
        log_probs = {tuple(h.tokens): h.log_prob for h in expected_hyps}
        for h in found_hyps:
            assert len(h.tokens) <= limit
            if tuple(h.tokens) in log_probs and len(h.tokens) == limit < max(limits):  # cut by the engine
                assert h.log_prob == pytest.approx(log_probs[tuple(h.tokens)], rel=1e-3)
                checked += 1
    assert checked
