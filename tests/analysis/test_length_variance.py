"""experiments/analysis/length_variance.py: BLEU's seed variance within rows split into brevity penalty and
precision."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from experiment.sample_results import machine, run_result, scored

from .scripts import analysis_script

REFERENCES = ["a dog runs on the grass .", "two men sit at a table ."]


@pytest.fixture(scope="module")
def length_variance():
    yield from analysis_script("length_variance")


def test_the_score_is_sacrebleus_bleu_and_brevity_penalty(length_variance) -> None:
    hypotheses = ["a dog runs .", "two men sit at a table ."]  # 11 tokens against 15: a penalty
    log_bleu, log_penalty = length_variance.score(hypotheses, REFERENCES)
    expected = sacrebleu.corpus_bleu(hypotheses, [REFERENCES])
    assert log_bleu == pytest.approx(math.log(expected.score)) and log_penalty == pytest.approx(math.log(expected.bp))
    assert length_variance.score(REFERENCES, REFERENCES) == (pytest.approx(math.log(100.0)), 0.0)


def runs(length_variance, penalties: list[float], precisions: list[float]) -> list:
    """Two rows far apart (the decomposition is within rows) with the given log BP and log P per seed."""
    return [length_variance.Run(row, seed, offset + bp + p, offset + bp, p)
            for row, offset in (("a", 0.0), ("b", -0.5))
            for seed, (bp, p) in enumerate(zip(penalties, precisions, strict=True), start=1)]  # fmt: skip


def test_known_decompositions(length_variance) -> None:
    spread = [-0.02, -0.01, 0.0, 0.01, 0.02]
    constant_precision = length_variance.decompose(runs(length_variance, spread, [-0.9] * 5), resamples=200)
    assert (constant_precision.rows, constant_precision.runs) == (2, 10)
    assert constant_precision.slope == pytest.approx(1.0) and constant_precision.r2 == pytest.approx(1.0)
    assert constant_precision.sd_bleu == pytest.approx(constant_precision.sd_penalty)
    assert constant_precision.sd_penalty == pytest.approx(np.sqrt(2 * sum(x * x for x in spread) / (10 - 2)))

    half_made_up = length_variance.decompose(runs(length_variance, spread, [-0.5 * x for x in spread]), 200)
    assert half_made_up.slope == pytest.approx(0.5) and half_made_up.correlation == pytest.approx(-1.0)

    orthogonal = [0.01, -0.02, 0.0, 0.02, -0.01]  # uncorrelated with spread and as large
    independent = length_variance.decompose(runs(length_variance, spread, orthogonal), 200)
    assert independent.correlation == pytest.approx(0.0, abs=1e-12)
    assert independent.slope == pytest.approx(1.0) and independent.r2 == pytest.approx(0.5)
    low, high = independent.r2_interval
    assert 0.0 <= low <= 0.5 <= high <= 1.0


def test_too_few_runs_is_an_error(length_variance) -> None:
    one_seed = [length_variance.Run("a", 1, 0.0, 0.0, 0.0), length_variance.Run("b", 1, 0.0, 0.0, 0.0)]
    with pytest.raises(ValueError, match="too few"):
        length_variance.decompose(one_seed)


def test_runs_outside_fp32_and_without_the_test_set_are_left_out(length_variance, tmp_path: Path) -> None:
    gpu = machine("cuda:0")
    tf32 = run_result(2, on=gpu, variant="a", device="cuda:0", tests={"test": scored(name="test")})
    archived = {
        "fp32": run_result(1, variant="a", tests={"test": scored(name="test")}),
        "tf32": replace(tf32, provenance=replace(tf32.provenance, tf32_allowed={"matmul": True, "cudnn": True})),
        "other test": run_result(3, variant="a", tests={"other": scored(name="other")}),
    }
    for seed, result in enumerate(archived.values(), start=1):
        folder = tmp_path / "runs" / "a" / f"seed-{seed}"
        (folder / "hyp").mkdir(parents=True)
        for name in ("test", "other"):
            (folder / "hyp" / f"{name}.txt").write_text("\n".join(REFERENCES) + "\n", encoding="utf-8")
        result.save(folder / "result.json")
    assert [(run.row, run.seed) for run in length_variance.read_runs(tmp_path, "test", REFERENCES)] == [("a", 1)]
