"""The English subject-verb agreement suite generator: what the rule finds, flips and skips."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from adlnmt.analysis.agreement import Lexicon, agreement_suite, bare_forms, find_agreement, third_person
from adlnmt.cli import main
from adlnmt.data.corpus import read_lines
from shared_data import MULTI30K, needs_multi30k

SIZES = Path(__file__).resolve().parents[2] / "experiments" / "contrastive" / "sizes.json"
LEXICON_TEXT = ["A man is standing.", "Dogs are running and playing.", "She is sitting, riding, watching, carrying.",
                "A girl is jumping, looking, fighting.", "He was walking."]  # fmt: skip


@pytest.mark.parametrize(
    ("sentence", "variant", "distance"),
    [
        ("A man in a blue shirt is standing.", "A man in a blue shirt are standing.", 5),
        ("Two dogs play in the snow.", "Two dogs plays in the snow.", 1),
        ("The woman watches a game.", "The woman watch a game.", 1),
        ("A dog carries a stick.", "A dog carry a stick.", 1),
        ("Women, wearing traditional clothing, are dancing.", "Women, wearing traditional clothing, is dancing.", 4),
        ("People were sitting on a bench.", "People was sitting on a bench.", 1),
        ("A boy with a red hat has a ball.", "A boy with a red hat have a ball.", 5),
        ("A man who is smiling walks.", "A man who are smiling walks.", 2),
        ("She rides a horse.", "She ride a horse.", 1),
        ("A girl wearing a life vest sits in the water.", "A girl wearing a life vest sit in the water.", 5),
    ],
)
def test_the_verb_agreeing_with_the_subject_is_flipped(sentence: str, variant: str, distance: int) -> None:
    (item,) = agreement_suite(["source"], [sentence], [LEXICON_TEXT])
    assert item.contrastive == [variant]
    assert item.distance == distance
    assert item.source == "source" and item.reference == sentence and item.extra["line"] == 1


@pytest.mark.parametrize(
    "sentence",
    [
        "A group of people are walking.",  # collective: singular or plural
        "A man and a woman are walking.",  # coordinated subject
        "People walking on a trail.",  # no finite verb
        "There are two dogs.",  # existential: agrees with what follows
        "Two dogs is running.",  # the verb disagrees already: the rule cannot tell which is right
        "A man can ride a horse.",  # a modal: no agreement
        "In the park a man is running.",  # no subject at the start
        "A dog with a stick that is red runs.",  # a relative clause of a nearer noun
        "A long-haired, tall man is running.",  # the noun phrase goes on after the comma
        "The spelunker finds water during his trek.",  # the head would be the verb
    ],
)
def test_what_the_rule_cannot_decide_is_skipped(sentence: str) -> None:
    assert find_agreement(sentence, lexicon(sentence)) is None


def lexicon(*texts: str) -> Lexicon:
    found = Lexicon()
    found.add([*LEXICON_TEXT, *texts])
    return found


def test_regular_verb_forms() -> None:
    assert [third_person(base) for base in ("watch", "carry", "play", "go", "ride", "pass")] == [
        "watches", "carries", "plays", "goes", "rides", "passes"]  # fmt: skip
    assert [bare_forms(word) for word in ("watches", "carries", "rides", "uses", "passes", "dress")] == [
        ["watch"], ["carry"], ["ride"], ["use"], ["pass"], []]  # fmt: skip


@needs_multi30k
def test_the_multi30k_suites_have_the_documented_sizes() -> None:
    """The generator is deterministic: the sizes by distance are those in experiments/contrastive/sizes.json."""
    documented = json.loads(SIZES.read_text(encoding="utf-8"))
    lexicon_text = list(read_lines(MULTI30K / "train.en.gz"))
    for name, sizes in documented["suites"].items():
        sources, references = (list(read_lines(MULTI30K / f"{name}.{lang}.gz")) for lang in ("de", "en"))
        items = agreement_suite(sources, references, [lexicon_text])
        assert len(items) == sizes["items"]
        assert {str(k): v for k, v in sorted(Counter(item.distance for item in items).items())} == sizes["by_distance"]


def test_references_without_an_agreement_item_are_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The rule reads English: German references give no item, which is an error, not an empty suite."""
    references, out = tmp_path / "ref.de", tmp_path / "suite.jsonl"
    references.write_text("Ein Mann steht auf der Straße.\nZwei Hunde spielen im Schnee.\n", encoding="utf-8")
    assert main(["contrastive-suite", "agreement", "--reference", str(references), "--output", str(out)]) == 2
    assert capsys.readouterr().err == (f"error: {references}: no agreement item found in its 2 lines (the agreement "
                                       f"rule reads English references); {out} not written\n")  # fmt: skip
    assert not out.exists()
