"""experiments/analysis/pooled_tests.py: a run's sentences of several test sets scored as one corpus."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import sacrebleu

from adlnmt.experiment.grid import Claim
from experiment.sample_results import run_result, scored

from .scripts import analysis_script

SETS = {  # name: (sources, references, a run's translations)
    "a": (["ein Hund läuft", "zwei Männer sitzen an einem Tisch"], ["a dog runs .", "two men sit at a table ."],
          ["a dog runs .", "two men sit at the table ."]),
    "b": (["eine Katze", "ein Kind spielt im Park mit einem Ball"],
          ["a cat .", "a child plays in the park with a ball ."],
          ["the cat .", "a kid plays with a ball in the park ."]),
}  # fmt: skip


@pytest.fixture(scope="module")
def pooled_tests():
    yield from analysis_script("pooled_tests")


def grid_and_run(tmp_path: Path) -> tuple[SimpleNamespace, tuple[Path, object]]:
    tests, evaluations = [], {}
    folder = tmp_path / "run"
    (folder / "hyp").mkdir(parents=True)
    for name, (sources, references, hypotheses) in SETS.items():
        for suffix, lines in (("src", sources), ("ref", references)):
            (tmp_path / f"{name}.{suffix}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (folder / "hyp" / f"{name}.txt").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
        tests.append(SimpleNamespace(name=name, src=tmp_path / f"{name}.src", ref=tmp_path / f"{name}.ref"))
        evaluations[name] = scored(name=name)
    return SimpleNamespace(tests=tests, path=tmp_path / "grid.yaml"), (folder, run_result(tests=evaluations))


def claim(low: int = 0, high: int = 0) -> Claim:
    return Claim("q", "", "better", "A", "B", 0.0, "bleu", "a", min_source_words=low, max_source_words=high)


def test_the_sets_are_scored_as_one_corpus(pooled_tests, tmp_path: Path) -> None:
    grid, (folder, result) = grid_and_run(tmp_path)
    pool = pooled_tests.Pool(grid, ["a", "b"], resamples=50)
    expected = sacrebleu.corpus_bleu(SETS["a"][2] + SETS["b"][2], [SETS["a"][1] + SETS["b"][1]]).score
    assert pool.scored(result) and pool.scores(folder, result, claim()).score == pytest.approx(expected)
    # sources of at most 3 words: the first sentence of each set
    short = sacrebleu.corpus_bleu([SETS["a"][2][0], SETS["b"][2][0]], [[SETS["a"][1][0], SETS["b"][1][0]]]).score
    assert pool.scores(folder, result, claim(high=3)).score == pytest.approx(short)
    assert not pooled_tests.Pool(grid, ["a"], 50).scored(run_result(tests={"b": scored(name="b")}))


def test_an_unknown_test_set_is_named(pooled_tests, tmp_path: Path) -> None:
    grid, _ = grid_and_run(tmp_path)
    with pytest.raises(SystemExit, match="no test set 'c'"):
        pooled_tests.Pool(grid, ["a", "c"], 50)
