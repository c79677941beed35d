"""experiments/analysis/verdict_changes.py: a grid's verdicts against a base commit's, and what changed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from adlnmt.verdicts.claims import Claim, Judgement
from shared_data import MULTI30K

from .scripts import analysis_script


@pytest.fixture(scope="module")
def changes():
    yield from analysis_script("verdict_changes")


def claim(first: str = "A", second: str = "B", kind: str = "better", margin: float = 0.0, quote: str = "A wins",
          metric: str = "bleu", test: str = "test", **more) -> Claim:  # fmt: skip
    return Claim(quote, "§1", kind, first, second, margin, metric, test, **more)


def base_record(tested_as: str = "A > B", verdict: str = "inconclusive at this scale", means=(30.0, 29.0),
                seeds=(1, 2), quote: str = "A wins", metric: str = "bleu", test: str = "test") -> dict:  # fmt: skip
    return {"tested_as": tested_as, "verdict": verdict, "first": [means[0], 0.1], "second": [means[1], 0.1],
            "seeds": list(seeds), "quote": quote, "metric": metric, "test": test, "measured": "+1.00"}  # fmt: skip


def judged(c: Claim, verdict: str, means=(30.0, 29.0), seeds=((1, 2), (1, 2))) -> Judgement:
    return Judgement(c, c.test, True, seeds, means, None, verdict=verdict)


@pytest.mark.parametrize(
    ("tested_as", "rows"),
    [
        ("self-att/self-att > RNN/RNN", ("self-att/self-att", "RNN/RNN")),
        ("AAN ≥ Transformer − 0.5", ("AAN", "Transformer")),
        ("self-att/RNN = self-att/self-att ± 0.5", ("self-att/RNN", "self-att/self-att")),
        ("AAN ≥ 4 × Transformer", ("AAN", "Transformer")),
        ("Source EOS/SOS token < COMET (valid_ppl, lower is better)", ("Source EOS/SOS token", "COMET")),
        ("AAN ≤ Transformer + 0.5 (ter, lower is better)", ("AAN", "Transformer")),
        ("Transformer > d_m = 512", ("Transformer", "d_m = 512")),
    ],
)
def test_the_rows_of_an_old_claim_are_read_from_its_tested_as(changes, tested_as: str, rows: tuple) -> None:
    base = changes.parse_base(base_record(tested_as))
    assert (base.first, base.second) == rows


def test_an_unreadable_tested_as_is_an_error(changes) -> None:
    with pytest.raises(ValueError, match="unreadable"):
        changes.parse_base(base_record("A beats B"))


def test_each_base_claim_pairs_with_one_claim_on_the_same_rows_metric_and_slice(changes) -> None:
    claims = [
        claim(quote="A is as good on METEOR", metric="meteor"),
        claim(quote="A wins on long sentences", min_source_words=12),
        claim(quote="A wins overall"),
        claim(quote="A wins overall, again"),
    ]
    bases = [changes.parse_base(base_record(quote="A wins overall"))]
    assert changes.counterparts(claims, bases) == {2: bases[0]}  # not METEOR, not the slice; the closer quote
    assert changes.counterparts([claim("B", "A")], bases) == {}


def test_what_changed_is_named_from_the_three_verdicts(changes) -> None:
    c = claim(kind="equivalent", margin=0.5)
    base = changes.parse_base(base_record("A ≥ B − 0.5", "holds", means=(30.0, 29.0)))
    then = judged(c, "inconclusive", means=(30.3, 29.0))
    now = judged(c, "holds", seeds=((1, 2, 3), (1, 2, 3)))
    text = changes.reasons(c, base, then, now, None)
    assert "restated: A ≥ B − 0.5 → A = B ± 0.5" in text
    assert "A on the base's seeds 30.00 → 30.30 (no run's output changed)" in text and "B on" not in text
    assert "statistics: holds → inconclusive on the same seeds" in text
    assert "more seeds: inconclusive → holds" in text


def test_a_seed_gone_from_a_row_is_named(changes) -> None:
    c = claim()
    base = changes.parse_base(base_record())
    then = judged(c, "inconclusive: one seed", means=(31.0, 29.0), seeds=((1,), (1, 2)))
    assert changes.reasons(c, base, then, then, None) == "A: seed 2 gone"  # one seed is still inconclusive
    holds = changes.parse_base(base_record(verdict="holds"))
    assert (
        changes.reasons(c, holds, then, then, None)
        == "A: seed 2 gone; statistics and fewer seeds: holds → inconclusive"
    )


def test_nothing_changed_and_a_claim_added_since(changes) -> None:
    c = claim(registered="abc1234")
    base = changes.parse_base(base_record())
    same = judged(c, "inconclusive")
    assert changes.reasons(c, base, same, same, None) == "unchanged"
    assert changes.reasons(c, None, same, same, None) == "added since the base (registered abc1234)"
    assert changes.verdict_class("out of scope at this data size") == "out of scope"
    assert changes.verdict_class("inconclusive at this scale") == "inconclusive"


def result(curve: list[int], device: str = "cpu", speed: float = 10.0) -> str:
    machine = {"device": device, "device_name": "NVIDIA H200" if device != "cpu" else "Xeon"}
    return json.dumps({"curve": [{"update": u} for u in curve], "updates": curve[-1], "best_valid_ppl": 5.0,
                       "tests": {"test": {"sentences_per_s": speed}}, "provenance": {"machine": machine}})  # fmt: skip


@pytest.fixture
def history(changes):
    class Files(changes.RunHistory):
        """Both commits' files given, not read from git."""

        def __init__(self) -> None:
            self.files: dict[str, tuple[str | None, str | None]] = {}
            self.apart = {("A", 2): "TF32 allowed in matrix products"}

        def _files(self, row: str, seed: int, name: str) -> tuple[str | None, str | None]:
            return self.files.get(name, (None, None))

    return Files()


def test_a_changed_run_is_said_to_be_trained_again_continued_or_evaluated_again(history) -> None:
    history.files["hyp/test.txt"] = ("a dog\n", "the dog\n")
    history.files["result.json"] = (result([200, 400]), result([200, 400, 600]))
    assert history.change("A", 2, "test", "bleu") == "seed 2 continued to 600 updates"
    history.files["result.json"] = (result([200, 400]), result([300, 400], device="cuda:0"))
    assert history.change("A", 2, "test", "bleu") == "seed 2 trained again on NVIDIA H200"
    history.files["result.json"] = (result([200, 400]), result([200, 400]))
    assert history.change("A", 2, "test", "bleu") == "seed 2 evaluated again"
    assert history.change("A", 2, "test", "sentences_per_s") is None
    history.files["result.json"] = (result([200, 400]), result([200, 400], speed=12.0))
    assert history.change("A", 2, "test", "sentences_per_s") == "seed 2 retimed"
    history.files["hyp/test.txt"] = ("a dog\n", "a dog\n")
    assert history.change("A", 2, "test", "bleu") is None
    history.files["result.json"] = (None, result([200]))
    assert history.change("A", 2, "test", "bleu") is None  # not at the base


def test_a_run_gone_from_its_row_says_why(history) -> None:
    assert history.gone("A", 2) == "seed 2 set apart (TF32 allowed in matrix products)"
    assert history.gone("B", 2) == "seed 2 not evaluated on this test set"


REPOSITORY = Path(__file__).resolve().parents[2]
GRIDS = ["experiments/adl-table5.yaml", "experiments/aan-table2.yaml", "experiments/comet-table1.yaml"]
BASE = "ec15689"


def have_inputs() -> bool:
    """The base commit in this clone's history and the test sets the grids name (../shared/data/multi30k)."""
    known = subprocess.run(["git", "cat-file", "-e", f"{BASE}^{{commit}}"], cwd=REPOSITORY, capture_output=True)
    return known.returncode == 0 and MULTI30K.is_dir()


@pytest.mark.skipif(not have_inputs(), reason=f"needs commit {BASE} in the history and ../shared/data/multi30k")
def test_the_committed_page_matches_the_committed_results(changes, monkeypatch) -> None:
    monkeypatch.chdir(REPOSITORY)
    page = changes.page(GRIDS, "cpu", BASE)
    assert page == (REPOSITORY / "experiments" / "analysis" / "verdict-changes.md").read_text(encoding="utf-8"), (
        "experiments/analysis/verdict-changes.md is out of date: rebuild it with the command on its first lines"
    )
