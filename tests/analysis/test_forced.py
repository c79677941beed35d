"""Forced decoding: teacher-forced scores equal the search's, in any batch, on torch and CTranslate2."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from adlnmt.analysis.forced import PairScorer, forced_log_probs
from adlnmt.cli import main
from adlnmt.data.data_dir import DataDir
from adlnmt.errors import UserError
from adlnmt.inference.search import SearchOptions, translate_ids
from adlnmt.inference.translator import Translator
from adlnmt.model import ModelConfig, Seq2Seq

ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODERS = {
    "transformer": ("pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
                    False),
    "cnn": ("pos -> repeat(2, res_nd(cnn(act=relu)) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm", False),
    "rnn-input-feeding": ("rnn -> mlp_src_att -> ff(32)", True),
}  # fmt: skip


def lines(demo_data: Path, split: str, side: str, count: int = 10) -> list[str]:
    return (demo_data / "corpus" / f"{split}.{side}").read_text(encoding="utf-8").splitlines()[:count]


def untrained(demo_data: Path, decoder: str, input_feeding: bool) -> Translator:
    data = DataDir.load(demo_data / "data")
    torch.manual_seed(3)
    config = ModelConfig(ENCODER, decoder, data.src_vocab.size, data.tgt_vocab.size, d_model=32, heads=4,
                         input_feeding=input_feeding)  # fmt: skip
    return Translator(Seq2Seq(config), data, 250)


@pytest.mark.parametrize("family", list(DECODERS))
def test_forced_scores_equal_the_search_log_probs(demo_data: Path, family: str) -> None:
    translator = untrained(demo_data, *DECODERS[family])
    sources = [translator.data.encode_source(line) for line in lines(demo_data, "test", "src")]
    found = translate_ids(translator.model, sources, SearchOptions(beam=3, nbest=3))
    pairs = [(source, hyp) for source, hyps in zip(sources, found, strict=True) for hyp in hyps]
    forced = forced_log_probs(translator.model, [s for s, _ in pairs], [h.tokens for _, h in pairs], batch_size=7)
    for (_, hyp), token_log_probs in zip(pairs, forced, strict=True):
        assert len(token_log_probs) == len(hyp.tokens) + 1
        assert sum(token_log_probs) == pytest.approx(hyp.log_prob, rel=1e-5, abs=1e-4)  # float32 beam sums


def test_a_trained_models_greedy_output_scores_its_log_prob(agreement_model: Path, demo_data: Path) -> None:
    scorer = PairScorer.load(agreement_model)
    sources = lines(demo_data, "test", "src")
    found = scorer.translator.search(sources, SearchOptions(beam=1))
    scores = scorer.score(sources, [hyps[0].text for hyps in found])
    for hyps, score in zip(found, scores, strict=True):
        assert score.pieces == [*hyps[0].pieces, "</s>"]
        assert score.log_prob == pytest.approx(hyps[0].log_prob, abs=1e-4)


def test_batches_do_not_change_the_scores(demo_data: Path) -> None:
    scorer = PairScorer(untrained(demo_data, *DECODERS["transformer"]))
    sources, targets = lines(demo_data, "test", "src", 20), lines(demo_data, "test", "tgt", 20)
    alone = scorer.score(sources, targets, batch_size=1)
    together = scorer.score(sources, targets, batch_size=64)
    for a, b in zip(alone, together, strict=True):
        assert a.pieces == b.pieces
        assert a.token_log_probs == pytest.approx(b.token_log_probs, abs=1e-5)


def test_a_pair_score_sums_and_normalises_its_tokens(demo_data: Path) -> None:
    scorer = PairScorer(untrained(demo_data, *DECODERS["transformer"]))
    (score,) = scorer.score(["A dog runs."], ["Un kane kuret."])
    record = score.to_dict(normalize=True)
    assert record["tokens"] == len(record["pieces"]) == len(record["token_log_probs"]) == score.tokens
    assert record["log_prob"] == pytest.approx(sum(record["token_log_probs"]))
    assert record["score"] == pytest.approx(record["log_prob"] / record["tokens"])
    assert score.to_dict()["score"] == record["log_prob"]
    assert all(value < 0 for value in record["token_log_probs"])


def test_unequal_sources_and_targets_are_refused(demo_data: Path) -> None:
    scorer = PairScorer(untrained(demo_data, *DECODERS["transformer"]))
    with pytest.raises(Exception, match="2 sources but 1 targets"):
        scorer.score(["a", "b"], ["c"])


@pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is None, reason="ctranslate2 is not installed")
def test_ctranslate2_score_batch_gives_the_torch_scores(agreement_model: Path, demo_data: Path, tmp_path: Path) -> None:
    sources, targets = lines(demo_data, "test", "src", 16), lines(demo_data, "test", "tgt", 16)
    targets[3] = ""  # EOS alone
    torch_scores = PairScorer.load(agreement_model).score(sources, targets, batch_size=5)
    assert (
        main(["export", "--model", str(agreement_model), "--format", "ctranslate2", "--out", str(tmp_path / "ct2")])
        == 0
    )
    exported = PairScorer.load(tmp_path / "ct2")  # an export directory is scored by its engine
    assert exported.translator.engine_name == "ctranslate2"
    for a, b in zip(torch_scores, exported.score(sources, targets, batch_size=5), strict=True):
        assert a.pieces == b.pieces
        assert a.token_log_probs == pytest.approx(b.token_log_probs, abs=1e-4)
    with pytest.raises(UserError, match="is a model directory; the ctranslate2 engine runs an export of it: run "
                       f"`adlnmt export --model {agreement_model} --format ctranslate2"):  # fmt: skip
        PairScorer.load(agreement_model, engine="ctranslate2")
    # torch asked for by name does not run an export (it ran CTranslate2 in silence, whatever --engine said)
    with pytest.raises(UserError, match="ct2 is a ctranslate2 export, run by --engine ctranslate2, not torch"):
        PairScorer.load(tmp_path / "ct2", engine="torch")
    assert PairScorer.load(tmp_path / "ct2", engine="ctranslate2").translator.engine_name == "ctranslate2"


def test_score_pairs_writes_json_lines(agreement_model: Path, demo_data: Path, tmp_path: Path, capsys) -> None:
    source, target = demo_data / "corpus" / "test.src", demo_data / "corpus" / "test.tgt"
    out = tmp_path / "scores.jsonl"
    argv = ["score-pairs", "--model", str(agreement_model), "--source", str(source), "--target", str(target),
            "--batch-size", "8", "--normalize", "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in records] == list(range(1, len(lines(demo_data, "test", "src", 10**6)) + 1))
    assert all(r["score"] == pytest.approx(r["log_prob"] / r["tokens"]) for r in records)
    short = tmp_path / "short.tgt"
    short.write_text("Un kane kuret.\n", encoding="utf-8")
    assert main(["score-pairs", "--model", str(agreement_model), "--source", str(source), "--target", str(short)]) == 2
    assert f"but {short} has 1" in capsys.readouterr().err
