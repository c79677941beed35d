"""Contrastive evaluation: the suite format, accuracy with bootstrap intervals, the demo suite and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from adlnmt.analysis.contrastive import (
    SuiteItem,
    accuracy_report,
    bucket,
    evaluate_model,
    evaluate_suite,
    markdown_table,
    read_suite,
    write_suite,
)
from adlnmt.analysis.demo_suite import LEXICON, demo_items, demo_suite
from adlnmt.analysis.forced import PairScorer
from adlnmt.cli import main
from adlnmt.errors import DataError, UserError
from adlnmt.inference.translator import Translator
from adlnmt.model import Seq2Seq
from adlnmt.store.atomic import check_writable

ITEM = {"source": "s", "reference": "r", "contrastive": ["c"], "phenomenon": "p", "distance": 2}


def demo_pairs(demo_data: Path) -> tuple[list[str], list[str]]:
    corpus = demo_data / "corpus"
    return [(corpus / f"test.{side}").read_text(encoding="utf-8").splitlines() for side in ("src", "tgt")]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{", "invalid JSON"),
        ("[1]", "expected a JSON object"),
        (json.dumps({**ITEM, "reference": 3}), "'reference' must be a string"),
        (json.dumps({**ITEM, "contrastive": []}), "'contrastive' must be a non-empty list"),
        (json.dumps({**ITEM, "contrastive": "c"}), "'contrastive' must be a non-empty list"),
        (json.dumps({**ITEM, "distance": -1}), "'distance' must be a non-negative integer"),
        (json.dumps({**ITEM, "distance": True}), "'distance' must be a non-negative integer"),
        ('{"source": "s", "reference": "r\\udc00", "contrastive": ["c"], "phenomenon": "p"}',
         "reference: a lone surrogate \\(U\\+DC00\\) at character 2, not a Unicode character"),
        ('{"source": "s", "reference": "r", "contrastive": ["c", "\\ud800"], "phenomenon": "p"}',
         "contrastive.1: a lone surrogate \\(U\\+D800\\)"),
        (json.dumps({**ITEM, "note": "x"})[:-1] + ', "deep": ' + "[" * 5000 + "]" * 5000 + "}",
         "invalid JSON \\(nested deeper than 100 levels\\)"),
        (json.dumps({**ITEM, "contrastive": ["c", "r"]}), "contrastive variant 2 is the reference itself"),
    ],
)  # fmt: skip
def test_a_malformed_suite_line_is_named(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text(json.dumps(ITEM) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as raised:
        read_suite(path)
    assert str(raised.value).startswith(f"{path}:2: ")


def test_a_suite_round_trips_with_its_extra_keys(tmp_path: Path) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text(json.dumps({**ITEM, "id": 7}) + "\n\n" + json.dumps({**ITEM, "distance": None}) + "\n")
    items = read_suite(path)
    assert [item.distance for item in items] == [2, None] and items[0].extra == {"id": 7}
    write_suite(items, tmp_path / "again.jsonl")
    assert read_suite(tmp_path / "again.jsonl") == items
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DataError, match="no items"):
        read_suite(tmp_path / "empty.jsonl")


def test_a_phenomenon_name_keeps_its_markdown_row() -> None:
    """A ``|`` or a line break in a phenomenon's name stays inside its cell of the table."""
    items = [SuiteItem("s", "r", ["c"], name, 1) for name in ("a|b", "two\nlines")]
    table = markdown_table(accuracy_report(items, [True, False], resamples=10))
    rows = table.splitlines()
    assert "| phenomenon: a\\|b | 1 | 100.0 |" in table and "| phenomenon: two lines | 1 | 0.0 |" in table
    assert len(rows) == 2 + 1 + 2 + 1 and all(row.replace("\\|", "").count("|") == 5 for row in rows)


def test_distance_buckets() -> None:
    labels = [bucket(d) for d in (0, 1, 4, 5, 6, 7, 9, 10, 40, None)]
    assert labels == ["0", "1", "4", "5-6", "5-6", "7-9", "7-9", "10+", "10+", "none"]


def test_accuracy_by_phenomenon_and_distance_with_intervals() -> None:
    items = [SuiteItem("s", "r", ["c"], "a" if i < 30 else "b", i % 3) for i in range(40)]
    correct = [i < 30 and i % 2 == 0 for i in range(40)]  # a: 15 of 30 right; b: none
    report = accuracy_report(items, correct, resamples=500, seed=4)
    assert report["overall"]["accuracy"] == pytest.approx(15 / 40)
    assert report["by_phenomenon"]["a"]["accuracy"] == pytest.approx(0.5)
    assert report["by_phenomenon"]["b"] == {"items": 10, "accuracy": 0.0, "low": 0.0, "high": 0.0}
    assert list(report["by_distance"]) == ["0", "1", "2"]
    for entry in (report["overall"], *report["by_phenomenon"].values(), *report["by_distance"].values()):
        assert entry["low"] <= entry["accuracy"] <= entry["high"]
    assert 0.2 < report["by_phenomenon"]["a"]["low"] < 0.5 < report["by_phenomenon"]["a"]["high"] < 0.8
    assert accuracy_report(items, correct, resamples=500, seed=4) == report
    table = markdown_table(report)
    assert "| **all** | 40 | 37.5 |" in table and "| phenomenon: b | 10 | 0.0 | 0.0–0.0 |" in table


def test_groups_of_the_same_items_get_the_same_interval() -> None:
    """One phenomenon: its row is the overall row, interval included (each group resamples with its own generator,
    seeded alike, not the next draws of one shared generator)."""
    items = [SuiteItem("s", "r", ["c"], "agreement", i % 2) for i in range(50)]
    report = accuracy_report(items, [i % 5 != 0 for i in range(50)], resamples=300, seed=2)
    assert report["by_phenomenon"]["agreement"] == report["overall"]
    assert report["overall"]["low"] < report["overall"]["accuracy"] < report["overall"]["high"]


def test_the_demo_suite_flips_exactly_one_agreeing_word(demo_data: Path) -> None:
    items = demo_items(*demo_pairs(demo_data))
    assert len(items) > 200
    for item in items:
        reference, variant = item.reference.rstrip(".").lower().split(), item.contrastive[0].rstrip(".").lower().split()
        changed = [(a, b) for a, b in zip(reference, variant, strict=True) if a != b]
        assert len(changed) == 1, item
        (was, now), (category, feature) = changed[0], item.phenomenon.split()
        assert LEXICON[was].category == LEXICON[now].category == category
        same = 1 if feature == "gender" else 0  # the other feature is kept
        assert LEXICON[was].features[same] == LEXICON[now].features[same]
        assert LEXICON[was].features[1 - same] != LEXICON[now].features[1 - same]
    for phenomenon in {item.phenomenon for item in items}:  # balanced: a context-free preference scores 50 %
        forms = [item.extra["reference_form"] for item in items if item.phenomenon == phenomenon]
        assert len(set(forms)) == 2 and forms.count(forms[0]) * 2 == len(forms)
    assert max(item.distance for item in items if item.phenomenon.startswith("verb")) >= 5
    assert demo_suite(120, seed=2) == demo_suite(120, seed=2) and len(demo_suite(120, seed=2)) <= 120


def test_a_demo_size_too_small_for_a_balanced_suite_is_refused(tmp_path: Path, capsys) -> None:
    """``--size 5`` wrote nothing, with "None: no demo item found in its 0 lines": 6 phenomena × 2 forms need 12."""
    with pytest.raises(UserError, match=r"^--size 11: a balanced suite of these pairs holds at least 12 items"):
        demo_suite(11)
    assert len(demo_suite(12)) == 12
    argv = ["contrastive-suite", "demo", "--size", "5", "--output", str(tmp_path / "suite.jsonl")]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("error: --size 5: a balanced suite of these pairs holds at least 12")
    assert not (tmp_path / "suite.jsonl").exists()


def test_a_bootstrap_beyond_memory_is_refused_before_the_scoring(monkeypatch) -> None:
    """--resamples 1000000000 was numpy's MemoryError as a traceback, after the scoring."""
    monkeypatch.setattr("adlnmt.memory.available_memory", lambda device="cpu": 2**20)
    items = [SuiteItem(**ITEM)] * 4
    with pytest.raises(UserError, match=r"^--resamples 100,000: the bootstrap over 4 items would take about"):
        evaluate_suite(None, items, resamples=10**5)  # type: ignore[arg-type]  # never asked to score


def test_a_variant_equal_to_the_reference_is_never_right(agreement_model: Path) -> None:
    items = [SuiteItem("The dog sees a cat.", "Lo kane un gato videt.", ["Lo kane un gato videt."], "same", 1)]
    result = evaluate_suite(PairScorer.load(agreement_model), items, resamples=10)
    assert result["correct"] == [False] and result["margins"] == [0.0]


def test_a_variant_that_reads_as_the_reference_is_named_before_the_scoring(
    agreement_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant differing from its reference only in spaces (which the vocabulary's normalisation drops) passed
    the suite check, was scored equal to it and counted as a loss whatever the model: accuracy 0 % on such items,
    without a word. It is now refused by its suite line, before any scoring."""
    suite = tmp_path / "suite.jsonl"
    variant = {**ITEM, "source": "The dog sees a cat.", "reference": "Lo kane un gato videt.",
               "contrastive": ["La kane un gato videt.", " Lo  kane un gato videt. "]}  # fmt: skip
    suite.write_text(json.dumps(ITEM) + "\n\n" + json.dumps(variant) + "\n", encoding="utf-8")
    monkeypatch.setattr(PairScorer, "score", lambda *args, **kwargs: pytest.fail("scored"))
    with pytest.raises(DataError, match=rf"^{suite}:3: contrastive variant 2 reads as the reference's very pieces"):
        evaluate_model(agreement_model, suite, resamples=10)


def test_a_trained_demo_model_beats_chance_and_an_untrained_one_does_not(
    agreement_model: Path, demo_data: Path
) -> None:
    """An untrained model is at chance only on average over initialisations: its arbitrary preferences repeat
    over items that share a word form, so one draw may land a few points off 50 %; six draws average close."""
    items = demo_items(*demo_pairs(demo_data))
    trained = PairScorer.load(agreement_model)
    result = evaluate_suite(trained, items)
    assert result["overall"]["low"] > 0.6, markdown_table(result)
    translator = trained.translator
    untrained = []
    for seed in range(6):
        torch.manual_seed(seed)
        fresh = Translator(Seq2Seq(translator.model.config), translator.data, translator.max_input_len)
        untrained.append(evaluate_suite(PairScorer(fresh), items, resamples=10)["overall"]["accuracy"])
    assert abs(sum(untrained) / len(untrained) - 0.5) < 0.06, untrained
    assert max(untrained) < result["overall"]["low"], untrained


def test_a_cut_source_is_warned_of_once_by_its_suite_line(
    agreement_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source longer than the model's input limit is scored cut, with one warning naming the suite's file and
    line (not one per variant, numbered by the flattened pairs: 'input line 5' for line 3 of a 2-item suite)."""
    trained = PairScorer.load(agreement_model).translator
    short = PairScorer(Translator(trained.model, trained.data, 3))
    monkeypatch.setattr(PairScorer, "load", classmethod(lambda cls, *args: short))
    long_source = "The dog sees a big cat today ."
    suite = tmp_path / "suite.jsonl"
    items = [{**ITEM, "source": "A"}, {**ITEM, "source": long_source, "contrastive": ["c", "d"]}]
    suite.write_text(json.dumps(items[0]) + "\n\n" + json.dumps(items[1]) + "\n", encoding="utf-8")
    capsys.readouterr()
    evaluate_model(agreement_model, suite, resamples=10)
    pieces = short.translator.encode_line(long_source).pieces
    assert capsys.readouterr().err == f"warning: {suite}:3: source of {pieces} pieces truncated to 3\n"


def test_an_unwritable_output_is_named_before_the_scoring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps(ITEM) + "\n", encoding="utf-8")
    monkeypatch.setattr("adlnmt.analysis.contrastive.evaluate_model", lambda *args: pytest.fail("scored first"))
    (tmp_path / "file").write_text("")
    for unwritable, reason in ((tmp_path, "a directory, not a file to write"), (tmp_path / "file" / "r.json",
                               "cannot write (Not a directory)"), (suite, f"the same file as the input {suite}, "
                               "which writing there would replace; choose another")):  # fmt: skip
        argv = ["contrastive", "--model", str(tmp_path), "--suite", str(suite), "--json", str(unwritable)]
        assert main(argv) == 2
        assert capsys.readouterr().err == f"error: {unwritable}: {reason}\n"
    assert suite.read_text(encoding="utf-8") == json.dumps(ITEM) + "\n"
    check_writable(None, str(tmp_path / "new.json"), "/dev/null")  # stdout, a new file, a device: fine


def test_the_contrastive_command_writes_a_table_and_json(
    agreement_model: Path, demo_data: Path, tmp_path: Path
) -> None:
    sources, targets = (demo_data / "corpus" / f"test.{side}" for side in ("src", "tgt"))
    suite = tmp_path / "demo.jsonl"
    argv = ["contrastive-suite", "demo", "--source", str(sources), "--reference", str(targets), "--size", "60",
            "--output", str(suite)]  # fmt: skip
    assert main(argv) == 0
    items = read_suite(suite)
    assert 0 < len(items) <= 60
    table, result = tmp_path / "table.md", tmp_path / "result.json"
    argv = ["contrastive", "--model", str(agreement_model), "--suite", str(suite), "--output", str(table),
            "--json", str(result), "--resamples", "100"]  # fmt: skip
    assert main(argv) == 0
    written = json.loads(result.read_text(encoding="utf-8"))
    assert written["overall"]["items"] == len(items) == len(written["correct"])
    assert written["model"] == str(agreement_model)
    assert table.read_text(encoding="utf-8") == markdown_table(written)
