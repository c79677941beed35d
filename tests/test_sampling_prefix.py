"""Sampling and prefix-constrained search through the one search: distributions, reproducibility, identities."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from adlnmt.analysis.forced import forced_log_probs
from adlnmt.cli import main
from adlnmt.data.data_dir import DataDir
from adlnmt.data.vocab import BOS, PAD
from adlnmt.errors import UserError
from adlnmt.inference.search import SearchOptions, pad_batch, sample, sampling_rule, translate_ids
from adlnmt.model import ModelConfig, Seq2Seq

ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODERS = {
    "transformer": "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "rnn": "pos -> repeat(1, res_nd(rnn) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
}


@pytest.fixture(scope="module")
def data(demo_data: Path) -> DataDir:
    return DataDir.load(demo_data / "data")


def untrained(data: DataDir, family: str) -> Seq2Seq:
    torch.manual_seed(5)
    config = ModelConfig(ENCODER, DECODERS[family], data.src_vocab.size, data.tgt_vocab.size, d_model=32, heads=4)
    return Seq2Seq(config).eval()


def sources(data: DataDir, demo_data: Path, count: int = 12) -> list[list[int]]:
    lines = (demo_data / "corpus" / "test.src").read_text(encoding="utf-8").splitlines()[:count]
    return [data.encode_source(line) for line in lines]


def tokens(found: list) -> list[list[list[int]]]:
    return [[h.tokens for h in hyps] for hyps in found]


def test_top_k_never_draws_outside_the_k_best() -> None:
    generator = torch.Generator().manual_seed(0)
    log_probs = torch.log_softmax(torch.randn(64, 50, generator=generator), dim=-1)
    best = log_probs.topk(3, dim=-1).indices
    options = SearchOptions(sampling="topk:3")
    drawn = torch.stack([sample(log_probs, options, generator) for _ in range(200)], dim=1)  # [64, 200]
    assert (drawn.unsqueeze(-1) == best.unsqueeze(1)).any(-1).all()
    assert max(len(set(row)) for row in drawn.tolist()) == 3


def test_sampling_follows_the_truncated_distribution() -> None:
    log_probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log().expand(20000, 4)
    generator = torch.Generator().manual_seed(1)

    def frequencies(spec: str, temperature: float = 1.0) -> list[float]:
        drawn = sample(log_probs, SearchOptions(sampling=spec, temperature=temperature), generator)
        return (torch.bincount(drawn, minlength=4).float() / drawn.numel()).tolist()

    assert frequencies("topk:2") == pytest.approx([5 / 8, 3 / 8, 0, 0], abs=0.015)
    assert frequencies("topp:0.8") == pytest.approx([5 / 8, 3 / 8, 0, 0], abs=0.015)  # 0.5 + 0.3 reach 0.8
    assert frequencies("topp:0.81") == pytest.approx([0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0], abs=0.015)
    assert frequencies("topp:1") == pytest.approx([0.5, 0.3, 0.15, 0.05], abs=0.015)
    sharp = torch.tensor([0.5, 0.3, 0.15, 0.05]) ** 2
    assert frequencies("topk:4", 0.5) == pytest.approx((sharp / sharp.sum()).tolist(), abs=0.015)


def test_sampled_translations_keep_to_the_k_best_at_every_step(data: DataDir, demo_data: Path) -> None:
    model, src = untrained(data, "transformer"), sources(data, demo_data, 6)
    found = translate_ids(model, src, SearchOptions(sampling="topk:3", nbest=4, temperature=5.0, seed=3))
    for source, hyps in zip(src, found, strict=True):
        for hyp in hyps:
            with torch.no_grad():
                logits = model(pad_batch([source]), torch.tensor([[BOS, *hyp.tokens]]))[0]  # [T, V]
            logits[:, [PAD, BOS]] = float("-inf")  # never predicted
            best = logits.topk(3, dim=-1).indices[: len(hyp.tokens)]  # the final EOS may be forced at the limit
            assert all(token in row for token, row in zip(hyp.tokens, best.tolist(), strict=True))


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("topk", "K must be an integer >= 1"),
        ("topk:0", "K must be an integer >= 1"),
        ("topk:x", "K must be an integer >= 1"),
        ("topp:0", "P must be a number in"),
        ("topp:1.5", "P must be a number in"),
        ("nucleus:0.9", "unknown sampling"),
    ],
)
def test_a_bad_sampling_rule_is_refused(spec: str, problem: str) -> None:
    with pytest.raises(UserError, match=problem):
        sampling_rule(spec)


@pytest.mark.parametrize("family", list(DECODERS))
def test_top_1_sampling_is_greedy_search(data: DataDir, demo_data: Path, family: str) -> None:
    model, src = untrained(data, family), sources(data, demo_data)
    greedy = translate_ids(model, src, SearchOptions(beam=1, batch_size=5))
    for spec in ("topk:1", "topp:1e-9"):
        sampled = translate_ids(model, src, SearchOptions(sampling=spec, nbest=2, batch_size=5, temperature=3.0))
        assert tokens(sampled) == [[hyps[0].tokens] * 2 for hyps in greedy]
        expected = [[hyps[0].log_prob] * 2 for hyps in greedy]
        assert [[h.log_prob for h in hyps] for hyps in sampled] == [pytest.approx(e, abs=1e-4) for e in expected]


def test_samples_are_reproducible_with_the_seed(data: DataDir, demo_data: Path) -> None:
    model, src = untrained(data, "transformer"), sources(data, demo_data)
    options = SearchOptions(sampling="topp:0.9", nbest=3, batch_size=4, seed=11)
    first = translate_ids(model, src, options)
    assert all(len(hyps) == 3 for hyps in first)
    assert tokens(translate_ids(model, src, options)) == tokens(first)
    assert tokens(translate_ids(model, src, replace(options, workers=2))) == tokens(first)
    assert tokens(translate_ids(model, src, replace(options, seed=12))) != tokens(first)
    for hyps, forced in zip(first, src, strict=True):  # each sample's log-probability is the model's
        scores = forced_log_probs(model, [forced] * 3, [h.tokens for h in hyps])
        assert [sum(s) for s in scores] == pytest.approx([h.log_prob for h in hyps], rel=1e-5, abs=1e-4)


@pytest.mark.parametrize("family", list(DECODERS))
@pytest.mark.parametrize("beam", [1, 4])
def test_a_prefix_starts_every_hypothesis(data: DataDir, demo_data: Path, family: str, beam: int) -> None:
    model, src = untrained(data, family), sources(data, demo_data)
    targets = (demo_data / "corpus" / "test.tgt").read_text(encoding="utf-8").splitlines()[: len(src)]
    prefixes = [data.tgt_vocab.encode(line)[: i % 5] for i, line in enumerate(targets)]  # 0–4 pieces
    options = SearchOptions(beam=beam, nbest=beam, batch_size=5)
    found = translate_ids(model, src, options, prefixes=prefixes)
    for hyps, prefix, source in zip(found, prefixes, src, strict=True):
        assert len(hyps) == beam
        assert all(h.tokens[: len(prefix)] == prefix for h in hyps)
        scores = forced_log_probs(model, [source] * beam, [h.tokens for h in hyps])
        assert [sum(s) for s in scores] == pytest.approx([h.log_prob for h in hyps], rel=1e-5, abs=1e-4)


@pytest.mark.parametrize("beam", [1, 4])
def test_an_empty_prefix_is_plain_search(data: DataDir, demo_data: Path, beam: int) -> None:
    model, src = untrained(data, "rnn"), sources(data, demo_data)
    options = SearchOptions(beam=beam, nbest=beam, batch_size=5)
    plain = translate_ids(model, src, options)
    for prefixes in ([[] for _ in src], None):
        found = translate_ids(model, src, options, prefixes=prefixes)
        assert tokens(found) == tokens(plain)
        assert [h.score for hyps in found for h in hyps] == [h.score for hyps in plain for h in hyps]


def test_translate_samples_and_continues_prefixes(demo_data: Path, tmp_path: Path, capsys) -> None:
    model_dir = tmp_path / "model"
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(model_dir), "--encoder", ENCODER,
            "--decoder", DECODERS["transformer"], "--d-model", "32", "--heads", "4", "--max-updates", "5",
            "--no-valid-bleu", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    source, prefix = tmp_path / "in.txt", tmp_path / "prefix.txt"
    source.write_text("The dog sees a cat.\nA king sleeps.\n", encoding="utf-8")
    prefix.write_text("Lo kane\nUn\n", encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--input", str(source), "--prefix", str(prefix)]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first.startswith("Lo kane") and second.startswith("Un")
    sampled = ["translate", "--model", str(model_dir), "--input", str(source), "--sampling", "topk:5", "--nbest", "3"]
    assert main(sampled) == 0
    once = capsys.readouterr().out
    assert main(sampled) == 0
    assert capsys.readouterr().out == once and len(once.splitlines()) == 2 and '"hypotheses"' in once
    prefix.write_text("Lo kane\n", encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--input", str(source), "--prefix", str(prefix)]) == 2
    assert f"{prefix}: 1 target prefixes for 2 input lines" in capsys.readouterr().err
    assert main([*sampled[:5], "--sampling", "topk:0"]) == 2
    assert "sampling 'topk:0': K must be an integer >= 1" in capsys.readouterr().err
