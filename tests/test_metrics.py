"""Metrics: known values on small fixed pairs, sentBLEU's add-1 smoothing, offline METEOR, the paired bootstrap."""

from __future__ import annotations

import io
import json
import math
import os
import random
from pathlib import Path

import pytest
import sacrebleu

from adlnmt import metrics
from adlnmt.cli import main
from adlnmt.errors import DataError, UserError

HYPS = ["The cat sat on the mat.", "Hello, world!"]


def test_identical_text_scores_perfectly() -> None:
    result = metrics.score(HYPS, HYPS, metrics.METRICS)
    assert result["bleu"] == pytest.approx(100.0)
    assert result["chrf"] == pytest.approx(100.0)
    assert result["ter"] == pytest.approx(0.0)
    assert result["sentbleu"] == pytest.approx(100.0)
    # all words match in one chunk: METEOR = 1 − γ·(chunks/matches)^β = 1 − 0.5/n³ for n (13a) tokens
    n_tokens = [7, 4]  # "The cat sat on the mat ." and "Hello , world !"
    assert result["meteor"] == pytest.approx(sum(100 * (1 - 0.5 / n**3) for n in n_tokens) / 2)
    for name in metrics.METRICS:
        assert result[f"{name}_label"] == metrics.LABELS[name]
        assert "version:" in result[f"{name}_signature"]
    assert "smooth:add-k[1.00]" in result["sentbleu_signature"]
    assert "match:exact+stem" in result["meteor_signature"]


def test_default_metrics_and_misaligned_files() -> None:
    result = metrics.score(["a b c d"], ["a b c d"])
    assert set(result) == {"bleu", "bleu_label", "bleu_signature", "chrf", "chrf_label", "chrf_signature"}
    assert metrics.score(["a b c d"], ["a b c d"], "chrf,bleu").keys() == result.keys()
    with pytest.raises(DataError, match=r"out/hyp\.txt has 1 lines but data/ref\.txt"):
        metrics.score(["a"], ["a", "b"], hyp_name="out/hyp.txt", ref_name="data/ref.txt")


def test_sentbleu_by_hand() -> None:
    # 1: unigrams 5/6, then add-1 on orders ≥ 2: (4+1)/(5+1), (3+1)/(4+1), (2+1)/(3+1); equal lengths, no BP
    first = 100 * (5 / 6 * 5 / 6 * 4 / 5 * 3 / 4) ** 0.25
    # 2: every precision is 1 after smoothing (4-grams: (0+1)/(0+1)), brevity penalty exp(1 − 4/3)
    second = 100 * math.exp(1 - 4 / 3)
    hyps, refs = ["a cat sat on the mat", "the cat sat"], ["the cat sat on the mat", "the cat sat down"]
    assert metrics.sentence_bleu(hyps[0], refs[0]) == pytest.approx(first)
    assert metrics.sentence_bleu(hyps[1], refs[1]) == pytest.approx(second)
    assert metrics.score(hyps, refs, ["sentbleu"])["sentbleu"] == pytest.approx((first + second) / 2)


def test_sentbleu_is_the_mean_of_add_one_sentence_bleu() -> None:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    hyps = ["the dog ran to the big red house today", "a man is eating a red apple", "nothing matches here at all"]
    refs = ["a dog ran to a big house today", "the man eats an apple", "completely different words in it"]
    per_sentence = [
        sacrebleu.sentence_bleu(h, [r], smooth_method="add-k", smooth_value=1).score
        for h, r in zip(hyps, refs, strict=True)
    ]
    assert metrics.score(hyps, refs, ["sentbleu"])["sentbleu"] == pytest.approx(sum(per_sentence) / 3)
    # Lin & Och's add-1 as NLTK implements it (method2) agrees on sentences of at least 4 tokens
    method2 = SmoothingFunction().method2
    for h, r, ours in zip(hyps, refs, per_sentence, strict=True):
        assert 100 * sentence_bleu([r.split()], h.split(), smoothing_function=method2) == pytest.approx(ours)


def test_meteor_matches_stems_but_no_synonyms_and_never_loads_wordnet() -> None:
    import nltk

    # cats/cat and running/runs share Porter stems: 3 matches in one chunk
    assert metrics.sentence_meteor("the cats running", "the cat runs") == pytest.approx(100 * (1 - 0.5 / 27))
    # big/large are WordNet synonyms only: 2 matches of 3 in 2 chunks, so P = R = 2/3 and penalty 0.5
    assert metrics.sentence_meteor("the big house", "the large house") == pytest.approx(100 * 2 / 3 * 0.5)
    assert metrics.sentence_meteor("", "something") == 0.0
    assert type(nltk.corpus.wordnet).__name__ == "LazyCorpusLoader"  # never loaded: no data, no download


def test_mismatched_line_counts_and_unknown_metrics_are_user_errors() -> None:
    with pytest.raises(DataError, match=r"hyp\.txt has 2 lines but ref\.txt has 3"):
        metrics.score(["a", "b"], ["a", "b", "c"], hyp_name="hyp.txt", ref_name="ref.txt")
    with pytest.raises(DataError, match=r"new\.txt has 1 lines but ref\.txt has 2"):
        metrics.paired_bootstrap(
            ["a", "b"], ["a"], ["a", "b"], ["bleu"], names=("old.txt", "new.txt"), ref_name="ref.txt"
        )
    with pytest.raises(UserError, match="unknown metric 'rouge'"):
        metrics.score(["a"], ["a"], ["bleu", "rouge"])
    with pytest.raises(DataError, match="empty"):
        metrics.score([], [])


def corpus() -> tuple[list[str], list[str], list[str], list[str]]:
    """References, a bad system (3 words changed per line) and two good ones (1 word changed in a quarter of
    the lines, not the same lines)."""
    rng = random.Random(0)
    words = ["the", "a", "dog", "cat", "man", "woman", "runs", "walks", "eats", "sees", "red", "big", "small"]
    words += ["house", "park", "street", "with", "in", "on"]
    refs = [[rng.choice(words) for _ in range(rng.randint(8, 12))] for _ in range(40)]

    def damage(sentence: list[str], count: int) -> str:
        out = list(sentence)
        for position in rng.sample(range(len(out)), count):
            out[position] = "xyz"
        return " ".join(out)

    good = [damage(ref, 1 if i % 4 == 0 else 0) for i, ref in enumerate(refs)]
    bad = [damage(ref, 3) for ref in refs]
    good2 = [damage(ref, 1 if i % 4 == 2 else 0) for i, ref in enumerate(refs)]
    return [" ".join(ref) for ref in refs], bad, good, good2


def test_paired_bootstrap_prefers_the_better_system() -> None:
    refs, bad, good, _ = corpus()
    before = os.environ.get("SACREBLEU_SEED")
    result = metrics.paired_bootstrap(bad, good, refs, metrics.METRICS, resamples=300, names=("bad", "good"))
    assert os.environ.get("SACREBLEU_SEED") == before
    assert result["systems"] == ("bad", "good") and list(result["metrics"]) == list(metrics.METRICS)
    alone = metrics.score(good, refs, metrics.METRICS)
    for name, entry in result["metrics"].items():
        assert 0.0 <= entry["p_value"] <= 1.0
        assert entry["p_value"] < 0.05 and entry["better"] == "b", name
        assert entry["b"]["score"] == pytest.approx(alone[name])
        assert entry["difference"] == pytest.approx(entry["b"]["score"] - entry["a"]["score"])
        assert entry["a"]["ci"] >= 0 and entry["b"]["ci"] >= 0
        assert "bs:300" in entry["signature"] and "seed:12345" in entry["signature"]
    assert result["metrics"]["ter"]["difference"] < 0 < result["metrics"]["bleu"]["difference"]
    again = metrics.paired_bootstrap(bad, good, refs, metrics.METRICS, resamples=300, names=("bad", "good"))
    assert again == result  # seeded
    swapped = metrics.paired_bootstrap(good, bad, refs, ["bleu"], resamples=300)
    assert swapped["metrics"]["bleu"]["better"] == "a"


def test_paired_bootstrap_of_similar_systems_is_not_significant() -> None:
    refs, _, good, good2 = corpus()
    result = metrics.paired_bootstrap(good, good2, refs, ["bleu", "sentbleu"], resamples=300)
    for entry in result["metrics"].values():
        assert 0.05 < entry["p_value"] <= 1.0
    with pytest.raises(UserError, match="seed"):
        metrics.paired_bootstrap(good, good2, refs, ["bleu"], seed=0)


def test_format_report_names_every_metric() -> None:
    refs, bad, good, _ = corpus()
    text = metrics.format_report(metrics.score(good, refs, metrics.METRICS))
    bootstrap = metrics.format_report(metrics.paired_bootstrap(bad, good, refs, metrics.METRICS, resamples=100))
    for label in metrics.LABELS.values():
        assert label in text and label in bootstrap
    assert "p = " in bootstrap and "B is better" in bootstrap


def test_a_difference_that_is_not_significant_names_no_winner() -> None:
    """Issue 69 point 20: "A is better" was printed at p = 0.40."""
    refs, _, good, good2 = corpus()
    result = metrics.paired_bootstrap(good, good2, refs, ["bleu"], resamples=300)
    entry = result["metrics"]["bleu"]
    assert entry["p_value"] > 0.05 and entry["better"] in ("a", "b")
    text = metrics.format_report(result)
    assert "is better" not in text and "not significantly (p >= 0.05): no winner" in text


def test_score_takes_resamples_only_with_a_bootstrap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--resamples without --bootstrap did nothing, in silence."""
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("a small dog runs\nthe cat sleeps\n")
    argv = ["score", "--hyp", str(hyp), "--ref", str(hyp), "--resamples", "20"]
    assert main(argv) == 2
    assert (
        "--resamples counts the paired bootstrap's resamples: it goes with --bootstrap HYP2" in capsys.readouterr().err
    )
    assert main([*argv, "--bootstrap", str(hyp), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["resamples"] == 20


def test_a_bootstrap_beyond_memory_is_refused(tmp_path: Path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--resamples 1000000000 was numpy's MemoryError as a traceback: sacreBLEU draws every resample at once."""
    monkeypatch.setattr("adlnmt.memory.available_memory", lambda device="cpu": 2**20)
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("a small dog runs\nthe cat sleeps\n")
    argv = ["score", "--hyp", str(hyp), "--ref", str(hyp), "--bootstrap", str(hyp), "--metrics", "chrf"]
    assert main([*argv, "--resamples", "20000"]) == 2  # 2e4 × 2 lines × (1 + 18 chrF statistics) × 8 bytes: 5.8 MiB
    err = capsys.readouterr().err
    assert err.startswith("error: --resamples 20,000: the bootstrap over 2 items would take about") and "lower" in err
    assert main([*argv, "--resamples", "1000"]) == 0  # 0.3 MiB


def test_score_reads_one_input_from_stdin(tmp_path: Path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--hyp -`` was 'error: -: file not found', while ``-`` is standard input or output for the other commands;
    two inputs given as ``-`` are refused (the second would read nothing)."""
    ref = tmp_path / "ref.txt"
    ref.write_text("a small dog runs\nthe cat sleeps\n")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(ref.read_bytes())))
    assert main(["score", "--hyp", "-", "--ref", str(ref), "--metrics", "bleu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] == pytest.approx(100)
    assert main(["score", "--hyp", "-", "--ref", str(ref), "--bootstrap", "-"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --hyp and --bootstrap are both -: only one input can be read from standard input\n"


def test_blank_references_are_refused_blank_hypotheses_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reference file of blank lines scored BLEU 0.00 (TER 0.00 against blank hypotheses) with exit 0."""
    blank, text = tmp_path / "blank.txt", tmp_path / "text.txt"
    blank.write_text("\n \n")
    text.write_text("a small dog runs\nthe cat sleeps\n")
    for hyp in (blank, text):
        assert main(["score", "--hyp", str(hyp), "--ref", str(blank)]) == 2
        assert capsys.readouterr().err == (
            f"error: {blank}: every one of its 2 lines is blank: no reference to score against\n"
        )
    assert main(["score", "--hyp", str(blank), "--ref", str(text), "--metrics", "bleu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] == 0.0
