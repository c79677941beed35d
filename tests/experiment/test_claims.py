"""The rules that turn a measured difference and its significance into a verdict (claims.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from adlnmt.experiment.claims import (
    FAILS,
    HOLDS,
    MISSING,
    OPEN,
    Judge,
    Judgement,
    measured,
    relation,
    speed_verdict,
    verdict,
)
from adlnmt.experiment.grid import Claim, load_grid
from adlnmt.experiment.runner import plan_runs


def claim(kind: str, tolerance: float = 0.0, ratio: float = 1.0) -> Claim:
    return Claim("q", "", kind, "A", "B", tolerance, "bleu", "test", ratio)


@pytest.mark.parametrize(
    ("kind", "difference", "significant", "expected"),
    [
        ("better", 1.0, {"a"}, HOLDS),
        ("better", 1.0, set(), OPEN),  # higher, but not significant for every seed
        ("better", -1.0, {"b"}, FAILS),
        ("better", -1.0, set(), OPEN),
        ("better", None, set(), MISSING),
        ("close", -0.4, {"b"}, HOLDS),  # within the tolerance, even if significant
        ("close", 2.0, {"a"}, HOLDS),
        ("close", -0.6, {"b"}, FAILS),
        ("close", -0.6, set(), OPEN),
    ],
)
def test_verdicts(kind: str, difference: float | None, significant: set[str], expected: str) -> None:
    assert verdict(claim(kind, 0.5), difference, significant) == expected


def test_a_close_claim_with_no_tolerance_means_not_worse() -> None:
    # "Neither modification increased BLEU": A ≥ B; a significantly better B refutes it, a tie does not
    assert relation(claim("close")) == "A ≥ B" and relation(claim("close", 0.5)) == "A ≥ B − 0.5"
    assert verdict(claim("close"), 0.0, set()) == HOLDS
    assert verdict(claim("close"), -0.1, {"b"}) == FAILS
    assert verdict(claim("close"), -0.1, set()) == OPEN


@pytest.mark.parametrize(
    ("ratios", "expected"),
    [
        ({1: 4.2, 2: 4.0}, HOLDS),  # every seed pair reaches the ratio
        ({1: 4.2, 2: 3.9}, OPEN),
        ({1: 1.3, 2: 1.2}, FAILS),
        ({}, MISSING),
    ],
)
def test_speed_verdicts(ratios: dict[int, float], expected: str) -> None:
    assert speed_verdict(claim("faster", ratio=4.0), ratios) == expected


def test_a_speed_claim_measures_the_seed_pairs_ratios_not_the_ratio_of_mean_speeds() -> None:
    # A: 10 and 40 sent/s, B: 20 and 20 (each pair timed in its own session): pairs ×0.5 and ×2, means ×1.25
    judged = Judgement(claim("faster", ratio=4.0), (1, 2), (25.0, 21.2), (20.0, 0.0), {}, {}, FAILS, {1: 0.5, 2: 2.0})
    assert measured(judged) == "×1.00"
    assert measured(Judgement(claim("faster"), (), (None, None), (None, None), {}, {}, MISSING)) == "–"
    assert measured(Judgement(claim("close"), (1,), (39.07, None), (39.27, None), {1: 0.1}, {1: "b"}, OPEN)) == "-0.20"


def test_speeds_timed_on_different_processors_are_not_compared(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("x\n")
    files = {f"{s}_{side}": "t.txt" for s in ("train", "valid") for side in ("src", "tgt")}
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text(yaml.safe_dump({
        "name": "g", "seeds": [1, 2], "data": files, "test": [{"name": "t", "src": "t.txt", "ref": "t.txt"}],
        "train": {"d_model": 32, "heads": 4},
        "variants": [{"name": "A", "preset": "transformer-aan"}, {"name": "B", "preset": "transformer-small"}],
        "claims": [{"quote": "A is 4x faster", "faster": ["A", "B"], "ratio": 4}],
    }))  # fmt: skip
    grid = load_grid(grid_file)

    def judged(capabilities: dict[tuple[str, int], str]) -> tuple[tuple[int, ...], tuple[int, ...], str]:
        for run in plan_runs(grid, tmp_path / "out"):
            machine = {"device": "cpu", "cpu": "AMD EPYC", "cpu_capability": capabilities[(run.variant.name, run.seed)]}
            speed = 50.0 if run.variant.name == "A" else 10.0
            result = {"fingerprint": run.fingerprint, "seed": run.seed, "tests": {"t": {"sentences_per_s": speed}},
                      "provenance": {"machine": machine}}  # fmt: skip
            run.dir.mkdir(parents=True, exist_ok=True)
            (run.dir / "result.json").write_text(json.dumps(result))
        j = Judge(grid, plan_runs(grid, tmp_path / "out"), tmp_path).judge(grid.claims[0])
        return j.seeds, j.apart, j.verdict

    same = {(v, s): "AVX2" for v in ("A", "B") for s in (1, 2)}
    assert judged(same) == ((1, 2), (), HOLDS)
    assert judged({**same, ("A", 2): "AVX512"}) == ((1,), (2,), HOLDS)  # 5x on seed 1; seed 2 not compared
    assert judged({**same, ("A", 1): "AVX512", ("A", 2): "AVX512"}) == ((), (1, 2), OPEN)
