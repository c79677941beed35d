"""Greedy and beam search on tiny trained models of every decoder family."""

from __future__ import annotations

import copy
import io
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import adlnmt
from adlnmt.cli import main
from adlnmt.data.vocab import BOS, EOS
from adlnmt.errors import UserError
from adlnmt.inference.batching import length_batches, length_limit
from adlnmt.inference.search import (
    SearchOptions,
    beam_batch,
    best_continuations,
    greedy_batch,
    length_penalty,
    pad_batch,
    rows_in_place,
    translate_ids,
)
from adlnmt.inference.translator import Translator, with_precision
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.speedups import OFF, SPEEDUPS, speedups_off

ENCODER = "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODERS = {
    "transformer": "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "rnn": "pos -> repeat(2, res_nd(rnn) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "cnn": "pos -> repeat(2, res_nd(cnn(act=relu)) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "aan": "pos -> repeat(2, res(aan) -> norm -> res(mh_dot_src_att) -> norm -> res(ffl) -> norm)",
    "ssru": "pos -> repeat(2, res_nd(ssru) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "none": "pos -> repeat(2, res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "comet": "pos -> repeat(2, res_d(mh_dot_self_att) -> norm -> res_d(mh_dot_src_att) -> norm "
    "-> res(comet_conv(norm=layer)) -> norm)",
}


@pytest.fixture(scope="module")
def trained(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Translator]:
    """One tiny model per decoder family, trained 40 updates on the demo corpus."""
    translators = {}
    for name, decoder in DECODERS.items():
        model_dir = tmp_path_factory.mktemp(name)
        argv = [
            "train",
            "--data",
            str(demo_data / "data"),
            "--model",
            str(model_dir),
            "--encoder",
            ENCODER,
            "--decoder",
            decoder,
            "--d-model",
            "32",
            "--heads",
            "4",
            "--batch-tokens",
            "800",
            "--lr",
            "3e-3",
            "--max-updates",
            "40",
            "--checkpoint-interval",
            "40",
            "--no-valid-bleu",
            "--no-progress",
        ]
        assert main(argv) == 0
        translators[name] = Translator.load(model_dir)
    assert adlnmt.Translator is Translator
    return translators


def sources(translator: Translator, demo_data: Path, count: int = 12) -> list[list[int]]:
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:count]
    return [translator.data.encode_source(line) for line in lines]


def forced_log_prob(translator: Translator, source: list[int], tokens: list[int]) -> float:
    model = translator.model
    src = pad_batch([source])
    tgt_in = torch.tensor([[BOS, *tokens]])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(src, tgt_in).float(), dim=-1)[0]  # [T, V]
    targets = torch.tensor([*tokens, EOS])
    return float(log_probs.gather(1, targets.unsqueeze(1)).sum())


@pytest.mark.parametrize("family", list(DECODERS))
def test_incremental_search_equals_refeeding_the_prefix(trained, demo_data: Path, family: str) -> None:
    translator = trained[family]
    srcs = sources(translator, demo_data)
    for beam in (1, 4):
        cached = translate_ids(translator.model, srcs, SearchOptions(beam=beam, nbest=beam, batch_size=5))
        refed = translate_ids(
            translator.model, srcs, SearchOptions(beam=beam, nbest=beam, batch_size=5, incremental=False)
        )
        for a, b in zip(cached, refed, strict=True):
            assert [h.tokens for h in a] == [h.tokens for h in b]
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)


@pytest.mark.parametrize("family", list(DECODERS))
def test_every_speedup_leaves_the_output_unchanged(trained, demo_data: Path, family: str, monkeypatch) -> None:
    """Token-identical n-best lists with all optimisations, with each switched off, and re-fed (uncached)."""
    translator = trained[family]
    srcs = sources(translator, demo_data, 16)
    monkeypatch.setattr(SPEEDUPS, "topk_block", 16)  # blocks of 15 words in the 150-word test vocabulary

    def search(beam: int, incremental: bool = True) -> list[list[list[int]]]:
        options = SearchOptions(beam=beam, nbest=beam, batch_size=6, incremental=incremental)
        found = translate_ids(translator.model, srcs, options)
        return [[h.tokens for h in hyps] for hyps in found]

    for beam in (1, 5):
        expected = search(beam)
        for name in OFF:
            with speedups_off(name):
                assert search(beam) == expected, f"{name} off changes the {family} output (beam {beam})"
        with speedups_off():
            assert search(beam, incremental=False) == expected


def test_rows_in_place_keeps_a_child_in_every_parents_row() -> None:
    generator = torch.Generator().manual_seed(1)
    for k in (1, 2, 5, 12):
        origin = torch.randint(0, k, (200, k), generator=generator)
        order = rows_in_place(origin)
        assert torch.equal(order.sort(dim=1).values, torch.arange(k).expand(200, k))  # a permutation
        laid_out = origin.gather(1, order)  # parent of the continuation in each slot
        for parents, placed in zip(origin.tolist(), laid_out.tolist(), strict=True):
            assert all(placed[p] == p for p in set(parents))  # each parent's row holds one of its children
            assert sorted(placed) == sorted(parents)


def test_block_topk_equals_full_topk() -> None:
    generator = torch.Generator().manual_seed(0)
    for vocab, k in ((8000, 5), (8000, 1), (1000, 12), (150, 4), (97, 3)):
        scores = torch.randn(7, k, generator=generator) - torch.arange(k) * 2.0
        scores[0, 1:] = float("-inf")  # first step: only beam 0 alive
        log_probs = torch.log_softmax(3 * torch.randn(7 * k, vocab, generator=generator), dim=-1)
        fast = best_continuations(scores, log_probs, 2 * k)
        with speedups_off("topk_block"):
            full = best_continuations(scores, log_probs, 2 * k)
        assert torch.equal(fast[0], full[0]) and torch.equal(fast[1], full[1]), (vocab, k)


@pytest.mark.parametrize("family", ["transformer", "rnn"])
def test_beam_one_equals_greedy(trained, demo_data: Path, family: str) -> None:
    translator = trained[family]
    src = pad_batch(sources(translator, demo_data))
    max_len = torch.full((src.size(0),), 30)
    greedy = greedy_batch(translator.model.eval(), src, max_len, SearchOptions(beam=1))
    beam = beam_batch(translator.model, src, max_len, SearchOptions(beam=1, length_penalty=0.0))
    assert [g.tokens for g in greedy] == [b[0].tokens for b in beam]
    assert [g.log_prob for g in greedy] == pytest.approx([b[0].log_prob for b in beam], abs=1e-4)


@pytest.mark.parametrize("family", list(DECODERS))
def test_beam_scores_are_the_models_forced_decoding_scores(trained, demo_data: Path, family: str) -> None:
    translator = trained[family]
    srcs = sources(translator, demo_data, 6)
    alpha = 0.6
    for source, hyps in zip(
        srcs, translate_ids(translator.model, srcs, SearchOptions(beam=5, nbest=5, length_penalty=alpha)), strict=True
    ):
        assert 1 <= len(hyps) <= 5
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)  # n-best order
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps)  # distinct
        for h in hyps:
            assert h.log_prob == pytest.approx(forced_log_prob(translator, source, h.tokens), abs=1e-3)
            assert h.score == pytest.approx(h.log_prob / length_penalty(len(h.tokens) + 1, alpha), abs=1e-6)


def test_beam_search_finds_at_least_the_greedy_score(trained, demo_data: Path) -> None:
    translator = trained["transformer"]
    srcs = sources(translator, demo_data)
    greedy = translate_ids(translator.model, srcs, SearchOptions(beam=1))
    beam = translate_ids(translator.model, srcs, SearchOptions(beam=8, length_penalty=0.0))
    assert sum(b[0].log_prob >= g[0].log_prob - 1e-4 for g, b in zip(greedy, beam, strict=True)) >= len(srcs) - 1


def test_batching_does_not_change_results(trained, demo_data: Path) -> None:
    translator = trained["aan"]
    srcs = sources(translator, demo_data)
    together = translate_ids(translator.model, srcs, SearchOptions(beam=3, length_penalty=0.0))
    alone = [translate_ids(translator.model, [s], SearchOptions(beam=3, length_penalty=0.0))[0] for s in srcs]
    assert [h[0].tokens for h in together] == [h[0].tokens for h in alone]


@pytest.mark.parametrize("family", ["transformer", "rnn"])
def test_worker_processes_give_the_same_results(trained, demo_data: Path, family: str) -> None:
    translator = trained[family]
    srcs = sources(translator, demo_data, 20)
    for beam in (1, 4):
        options = SearchOptions(beam=beam, nbest=2 if beam > 1 else 1, batch_size=3, alignments=True)
        alone = translate_ids(translator.model, srcs, options)
        shared = translate_ids(translator.model, srcs, replace(options, workers=2))
        for a, b in zip(alone, shared, strict=True):
            assert [(h.tokens, h.score) for h in a] == [(h.tokens, h.score) for h in b]
            assert all(torch.equal(x.alignment, y.alignment) for x, y in zip(a, b, strict=True))
    with pytest.raises(UserError, match="worker processes are for the CPU"):
        translate_ids(translator.model, srcs, SearchOptions(beam=1, workers=2), device="meta")


@pytest.mark.parametrize("beam", [1, 3])
def test_alignments_are_attention_distributions(trained, demo_data: Path, beam: int) -> None:
    translator = trained["transformer"]
    srcs = sources(translator, demo_data, 5)
    for source, hyps in zip(
        srcs,
        translate_ids(translator.model, srcs, SearchOptions(beam=beam, length_penalty=0.0, alignments=True)),
        strict=True,
    ):
        alignment = hyps[0].alignment
        assert alignment.shape == (len(hyps[0].tokens) + 1, len(source))
        assert torch.allclose(alignment.sum(1), torch.ones(alignment.size(0)), atol=1e-4)
        assert (alignment >= 0).all()


def test_max_length_is_respected(trained, demo_data: Path) -> None:
    translator = trained["none"]
    src = pad_batch(sources(translator, demo_data, 4))
    for hyps in beam_batch(translator.model, src, torch.tensor([0, 1, 2, 3]), SearchOptions(beam=3, nbest=3)):
        assert hyps  # a forced EOS still gives hypotheses
    found = beam_batch(translator.model, src, torch.tensor([0, 1, 2, 3]), SearchOptions(beam=3, length_penalty=0.0))
    lengths = [len(h[0].tokens) for h in found]
    assert all(n <= limit for n, limit in zip(lengths, [0, 1, 2, 3], strict=True))


@pytest.mark.parametrize("beam", [1, 3])
def test_exact_lengths_force_the_output_length(trained, demo_data: Path, beam: int) -> None:
    translator = trained["transformer"]
    wanted = [1, 3, 17, 40]
    options = SearchOptions(beam=beam, nbest=beam, length_penalty=0.0)
    found = translate_ids(translator.model, sources(translator, demo_data, 4), options, exact_lengths=wanted)
    for hyps, length in zip(found, wanted, strict=True):
        assert len(hyps) == beam
        assert all(len(h.tokens) == length and EOS not in h.tokens for h in hyps)


def test_reduced_precisions_translate_every_line(trained, demo_data: Path, tmp_path: Path, capsys) -> None:
    """int8 (dynamic quantisation) and bf16 give a translation per line; fp16 needs CUDA."""
    model_dir = trained["transformer"].model_dir
    source = tmp_path / "in.txt"
    source.write_text("\n".join((demo_data / "corpus" / "test.src").read_text().splitlines()[:6]) + "\n")
    reference = trained["transformer"].translate(source.read_text().splitlines(), SearchOptions(beam=3))
    for precision in ("int8", "bf16"):
        output = tmp_path / f"{precision}.txt"
        argv = ["translate", "--model", str(model_dir), "--input", str(source), "--output", str(output)]
        assert main([*argv, "--beam", "3", "--precision", precision]) == 0
        assert re.search(r"translated 6 of 6 lines in [\d.]+ s \([\d.,]+ sentences/s", capsys.readouterr().err)
        lines = output.read_text().splitlines()
        assert len(lines) == 6 and sum(a == b for a, b in zip(lines, reference, strict=True)) >= 3
    assert main(["translate", "--model", str(model_dir), "--input", str(source), "--precision", "fp16"]) == 2
    assert "precision fp16 needs a CUDA device" in capsys.readouterr().err


def test_a_dash_reads_stdin_and_writes_stdout(trained, demo_data: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """``--input -`` and ``--output -`` are stdin and stdout (the Unix convention), never a file named ``-``."""
    model_dir = trained["transformer"].model_dir
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:3]
    expected = trained["transformer"].translate(lines, SearchOptions(beam=3))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("".join(f"{x}\n" for x in lines).encode())))
    assert main(["translate", "--model", str(model_dir), "--input", "-", "--output", "-", "--beam", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == expected and not (tmp_path / "-").exists()


def test_int8_quantizes_recurrent_layers(trained, demo_data: Path) -> None:
    """int8 runs LSTMs (and GRUs) as dynamically quantized modules too: decoder steps and the packed birnn."""
    translator = trained["rnn"]
    quantized = with_precision(copy.deepcopy(translator.model), "int8", "cpu")
    assert sum(isinstance(m, torch.ao.nn.quantized.dynamic.LSTM) for m in quantized.modules()) == 2
    batch = sources(translator, demo_data, 8)
    options = SearchOptions(beam=3)
    found, expected = translate_ids(quantized, batch, options), translate_ids(translator.model, batch, options)
    assert sum(a[0].tokens == b[0].tokens for a, b in zip(found, expected, strict=True)) >= 4
    model = Seq2Seq(ModelConfig("pos -> birnn(cell=gru) -> rnn", "pos -> rnn -> mh_dot_src_att", 40, 40, d_model=32))
    src = pad_batch([[5, 6, 7, 8, 9], [5, 6]])  # [2, 5]: the second sentence padded
    quantized = with_precision(copy.deepcopy(model), "int8", "cpu")
    with torch.inference_mode():
        full, int8, alone = model.eval().encode(src), quantized.encode(src), quantized.encode(src[1:, :2])
    assert torch.allclose(int8.final, full.final, atol=0.05)
    # the backward GRU starts at the last word (reading padding first moves it by ~0.5; int8 rounding by ~0.002)
    assert torch.allclose(int8.final[1, :2], alone.final[0], atol=0.02)


def test_translator_keeps_lines_aligned(trained, capsys: pytest.CaptureFixture[str]) -> None:
    translator = trained["transformer"]
    lines = ["the dog sees a cat", "", "☃ ☃ unseen ✈ characters", "the cat " * 400, "   "]
    outputs = translator.translate(lines, SearchOptions(beam=3))
    assert len(outputs) == 5 and outputs[1] == "" and outputs[4] == ""
    assert "line 4" in capsys.readouterr().err  # the long line was truncated with a warning
    found = translator.search(lines, SearchOptions(beam=4, nbest=3))
    assert [len(h) for h in found] == [3, 0, 3, 3, 0]
    assert all(math.isfinite(t.score) for hyps in found for t in hyps)


def translate_file(model_dir: Path, source: Path, output: Path, *flags: str) -> int:
    return main(["translate", "--model", str(model_dir), "--input", str(source), "--output", str(output), *flags])


@pytest.mark.parametrize("ratio", [0.3, 1.1, 1.15, 2.0, 2.3])
def test_the_shared_length_limit_is_the_float32_product_the_search_always_used(ratio: float) -> None:
    """Every engine's length limit (CTranslate2's too): float64 would differ for some lengths at these ratios."""
    options = SearchOptions(max_len_ratio=ratio)
    expected = ((torch.arange(400).float() * ratio).long() + options.max_len_extra).tolist()
    assert [length_limit(n, options) for n in range(400)] == expected
    assert length_batches([3, 1, 2, 1, 3], 2) == [[1, 3], [2, 0], [4]]  # stable: equal lengths keep their order


def test_cli_alignments_give_the_source_pieces_and_hard_alignments(trained, tmp_path: Path) -> None:
    """fairseq's --print-alignment: 'i-j' for every target piece j, i its most attended source piece (0-based, without
    markers and EOS)."""
    import json

    translator = trained["transformer"]
    lines = ["the dog sees a cat", "", "the small girls see the old king"]
    source, output = tmp_path / "in.txt", tmp_path / "out.jsonl"
    source.write_text("\n".join(lines) + "\n")
    assert translate_file(translator.model_dir, source, output, "--beam", "3", "--nbest", "2", "--alignments") == 0
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert "source_pieces" not in records[1] and records[1]["hypotheses"] == []
    first = 1 if translator.data.source_markers else 0
    for line, record in zip(lines, records, strict=True):
        if not line:
            continue
        pieces = record["source_pieces"]
        read = translator.source_pieces(translator.encode_line(line).ids)
        assert pieces == read and pieces[-1] == translator.data.src_vocab.piece(EOS)
        assert len(record["hypotheses"]) == 2
        for hyp in record["hypotheses"]:
            attention = torch.tensor(hyp["alignment"])[: len(hyp["pieces"]), first : len(pieces) - 1]
            expected = [f"{i}-{j}" for j, i in enumerate(attention.argmax(1).tolist())]
            assert hyp["hard_alignment"].split() == expected and len(expected) == len(hyp["pieces"])


def test_translate_score_and_average_commands(trained, demo_data: Path, tmp_path: Path, capsys) -> None:
    import json

    model_dir = trained["transformer"].model_dir
    source = tmp_path / "in.txt"
    source.write_text("the dog sees a cat\n\nthe small girls see the old king\n")
    nbest = tmp_path / "nbest.jsonl"
    assert translate_file(model_dir, source, nbest, "--beam", "4", "--nbest", "3", "--alignments") == 0
    records = [json.loads(line) for line in nbest.read_text().splitlines()]
    assert [r["line"] for r in records] == [1, 2, 3] and records[1]["hypotheses"] == []
    first = records[0]["hypotheses"]
    assert len(first) == 3 and first[0]["score"] >= first[1]["score"] >= first[2]["score"]
    assert len(first[0]["alignment"]) == len(first[0]["pieces"]) + 1
    assert main(["average", "--model", str(model_dir), "--last", "1"]) == 0
    hyp = tmp_path / "hyp.txt"
    assert translate_file(model_dir, source, hyp, "--checkpoint", "averaged", "--beam", "2") == 0
    assert len(hyp.read_text().split("\n")) == 4  # three lines and the final newline
    capsys.readouterr()
    bootstrap = ["--metrics", "bleu,ter", "--bootstrap", str(hyp), "--resamples", "50", "--json"]
    assert main(["score", "--hyp", str(hyp), "--ref", str(hyp), *bootstrap]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metrics"]["bleu"]["difference"] == 0
    (tmp_path / "short.txt").write_text("one line\n")
    assert main(["score", "--hyp", str(hyp), "--ref", str(tmp_path / "short.txt")]) == 2
    assert "has 3 lines but" in capsys.readouterr().err


def test_translate_search_flags_reach_the_search(trained, demo_data: Path, tmp_path: Path) -> None:
    """--uncached decodes token for token as the cached search; --max-len-ratio 0 --max-len-extra N caps outputs."""
    import json

    model_dir = trained["transformer"].model_dir
    source = tmp_path / "in.txt"
    source.write_text("\n".join((demo_data / "corpus" / "test.src").read_text().splitlines()[:4]) + "\n")
    cached, uncached, capped = (tmp_path / name for name in ("cached.jsonl", "uncached.jsonl", "capped.jsonl"))
    assert translate_file(model_dir, source, cached, "--beam", "3", "--nbest", "2") == 0
    assert translate_file(model_dir, source, uncached, "--beam", "3", "--nbest", "2", "--uncached") == 0

    def pieces(path: Path) -> list[list[str]]:  # their scores differ in float rounding only
        return [h["pieces"] for line in path.read_text().splitlines() for h in json.loads(line)["hypotheses"]]

    assert pieces(uncached) == pieces(cached) and max(map(len, pieces(cached))) > 2
    capping = ["--nbest", "2", "--max-len-ratio", "0", "--max-len-extra", "2"]
    assert translate_file(model_dir, source, capped, *capping) == 0
    assert len(pieces(capped)) == 8 and max(map(len, pieces(capped))) <= 2


def test_translate_with_workers_writes_the_same_lines(trained, demo_data: Path, tmp_path: Path, capsys) -> None:
    model_dir = trained["cnn"].model_dir
    source = tmp_path / "in.txt"
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:30]
    source.write_text("\n".join([*lines[:10], "", *lines[10:]]) + "\n")
    alone, shared = tmp_path / "alone.txt", tmp_path / "shared.txt"
    assert translate_file(model_dir, source, alone, "--batch-size", "4") == 0
    assert translate_file(model_dir, source, shared, "--batch-size", "4", "--workers", "2", "--threads", "1") == 0
    assert shared.read_text() == alone.read_text() and len(shared.read_text().splitlines()) == 31
    with pytest.raises(SystemExit, match="2"):  # refused by the flag's declared range, as argparse refuses
        translate_file(model_dir, source, shared, "--workers", "0")
    assert "argument --workers: must be >= 1, got 0" in capsys.readouterr().err
