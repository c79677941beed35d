"""The grid's ``speed:`` section: whole-command timings of finished runs, their record, the report's section with
the Pareto plot, speed claims, and the section's errors."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.experiment.grid import load_grid
from adlnmt.experiment.speed import SPEED_FILE, Measurement, Point, judge_claims, median_interval, pareto
from adlnmt.experiment.speed_spec import SpeedClaim, SpeedSpec

TINY = {"d_model": 32, "heads": 4, "batch_tokens": 600, "max_updates": 6, "checkpoint_interval": 3, "lr": 2e-3}
ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODER = "pos -> repeat(1, res_nd({x}) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"
SPEED = {"engines": ["torch", "ctranslate2"], "beams": [1, 2], "repeats": 2, "lines": 12, "threads": 1,
         "claims": [{"quote": "aan decodes faster", "where": "§5", "faster": ["aan", "transformer"], "ratio": 1.5,
                     "beam": 2, "engine": "torch"}]}  # fmt: skip


def grid_file(root: Path, corpus: Path, speed: dict | None = None) -> Path:
    grid = {
        "name": "speedy",
        "data": {"train_src": str(corpus / "train.src"), "train_tgt": str(corpus / "train.tgt"),
                 "valid_src": str(corpus / "valid.src"), "valid_tgt": str(corpus / "valid.tgt"), "vocab_size": 150},
        "test": [{"name": "test", "src": str(corpus / "test.src"), "ref": str(corpus / "test.tgt")}],
        "metrics": ["bleu"],
        "seeds": [1],
        "bootstrap_resamples": 200,
        "translate": {"beam": 2},
        "train": {**TINY, "valid_bleu": False},
        "variants": [{"name": "transformer", "encoder": ENCODER, "decoder": DECODER.format(x="mh_dot_self_att")},
                     {"name": "aan", "encoder": ENCODER, "decoder": DECODER.format(x="aan")}],
        "speed": speed if speed is not None else SPEED,
    }  # fmt: skip
    path = root / "grid.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


def experiment(*argv: str) -> tuple[int, str]:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        status = main(["experiment", *argv])
    return status, output.getvalue()


def test_finished_runs_are_timed_once_and_reported(demo_data: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'adlnmt[ct2]'")
    out = tmp_path / "out"
    args = (str(grid_file(tmp_path, demo_data / "corpus")), "--out", str(out), "--threads", "1")
    status, stdout = experiment(*args)
    assert status == 0, stdout
    assert "speed of transformer seed 1: torch beam 1" in stdout and "speed of aan seed 1" in stdout
    records = {name: json.loads((out / "runs" / name / "seed-1" / SPEED_FILE).read_text())
               for name in ("transformer", "aan")}  # fmt: skip
    for name, record in records.items():
        assert record["settings"]["beams"] == [1, 2] and record["machine"]["threads"] == 1
        assert record["machine"]["cpu"] and record["machine"]["load_average"] is not None
        timed = {(m["engine"], m["beam"]): m for m in record["measurements"]}
        assert set(timed) == {("torch", 1), ("torch", 2), ("ctranslate2", 1), ("ctranslate2", 2)}
        for (engine, _), m in timed.items():
            if name == "aan" and engine == "ctranslate2":  # CTranslate2 runs Transformers only
                assert m["seconds"] == [] and "aan" in m["skipped"]
            else:
                assert len(m["seconds"]) == 2 and all(s > 0 for s in m["seconds"]) and m["sentences"] == 12
                assert len(m["load"]) == 2 and len(m["busy_beside"]) == 2
    report = (out / "report.md").read_text()
    assert "## Decoding speed (whole commands)" in report and "plots/speed-pareto.png" in report
    assert (out / "plots" / "speed-pareto.png").stat().st_size > 0
    assert "| transformer | ctranslate2 | 2 |" in report and "Not timed: aan (ctranslate2:" in report
    assert "| aan decodes faster | §5 | aan ≥ 1.5 × transformer (beam 2, torch) | 1 |" in report
    assert "inconclusive: one seed" in report
    lines = (out / "speed.csv").read_text().splitlines()
    assert lines[0].startswith("variant,engine,beam,seed") and len(lines) == 1 + 6

    before = {name: (out / "runs" / name / "seed-1" / SPEED_FILE).stat().st_mtime_ns for name in records}
    status, stdout = experiment(*args)  # finished and timed: nothing is timed again
    assert status == 0 and "speed of" not in stdout
    assert before == {name: (out / "runs" / name / "seed-1" / SPEED_FILE).stat().st_mtime_ns for name in records}
    fewer = {**SPEED, "engines": ["torch"], "beams": [1], "repeats": 1, "claims": []}
    status, stdout = experiment(str(grid_file(tmp_path, demo_data / "corpus", fewer)), *args[1:])
    assert status == 0 and "speed of transformer seed 1: torch beam 1" in stdout  # other settings: timed again
    assert "ctranslate2" not in (out / "runs" / "aan" / "seed-1" / SPEED_FILE).read_text()


def point(variant: str, speeds: dict[int, float], score: float | None = 30.0, beam: int = 5) -> Point:
    """A point whose runs decoded 100 sentences in 100 / speed seconds, every repeat alike."""
    return Point(variant, "torch", beam, score,
                 {seed: Measurement("torch", beam, 100, (100 / s,) * 3, (0.5,) * 3, (0.0,) * 3)
                  for seed, s in speeds.items()})  # fmt: skip


def test_median_intervals_state_their_coverage() -> None:
    assert median_interval([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0, 0.75)
    assert median_interval([5.0, 1.0, 4.0, 2.0, 3.0]) == (3.0, 1.0, 5.0, 0.9375)
    median, low, high, coverage = median_interval([float(x) for x in range(1, 11)])
    assert (median, low, high) == (5.5, 2.0, 9.0) and coverage == pytest.approx(1 - 2 * 11 / 1024)  # [3, 8]: 89 %


def test_the_pareto_frontier_keeps_the_undominated() -> None:
    fast, good, both_worse, unscored = (point("fast", {1: 50}, 20.0), point("good", {1: 10}, 30.0),
                                        point("worse", {1: 9}, 25.0), point("none", {1: 99}, None))  # fmt: skip
    assert [p.variant for p in pareto([fast, good, both_worse, unscored])] == ["fast", "good"]


def test_speed_claims_are_judged_on_seed_pairs() -> None:
    claims = (SpeedClaim("three times", "", "fast", "slow", 3.0, 5, "torch"),
              SpeedClaim("ten times", "", "fast", "slow", 10.0, 5, "torch"),
              SpeedClaim("one seed", "", "fast", "alone", 1.0, 5, "torch"),
              SpeedClaim("untimed", "", "fast", "missing", 1.0, 5, "torch"))  # fmt: skip
    grid = SimpleNamespace(speed=SpeedSpec("test", beams=(5,), claims=claims), bootstrap_resamples=2000)
    found = [point("fast", {1: 40, 2: 44, 3: 42}), point("slow", {1: 8, 2: 8.5, 3: 8.2}), point("alone", {3: 1})]
    judged = {j["claim"].quote: j for j in judge_claims(grid, found)}
    assert judged["three times"]["verdict"] == "holds"
    assert judged["three times"]["tested"].effect == pytest.approx(5.13, abs=0.05)
    assert judged["ten times"]["verdict"] == "does not hold"
    assert judged["one seed"]["verdict"] == "inconclusive: one seed"
    assert judged["untimed"]["verdict"] == "not run yet"


@pytest.mark.parametrize(
    ("speed", "message"),
    [
        ({"engine": ["torch"]}, r"speed\.engine: unknown key \(did you mean 'engines'\?\)"),
        ({"engines": ["marian"]}, r"speed\.engines\[0\]: unknown engine"),
        ({"precision": "fp8"}, r"speed\.precision: unknown precision"),
        ({"repeats": 0}, r"speed\.repeats: must be at least 1, got 0"),
        ({"test": "nope"}, r"speed\.test: unknown test set"),
        ({"beams": [1, 1]}, r"speed\.beams: values must be distinct"),
        ({"claims": [{"quote": "q", "faster": ["aan", "rnn"], "ratio": 2}]}, r"claims\[0\]\.faster: unknown variant"),
        ({"claims": [{"quote": "q", "faster": ["aan", "transformer"], "ratio": 0}]}, r"\.ratio: expected a positive"),
        (
            {"claims": [{"quote": "q", "faster": ["aan", "transformer"], "ratio": 2, "beam": 4}]},
            r"\.beam: 4 is not among the timed beams \[1, 5\]",
        ),
    ],
)
def test_a_bad_speed_section_names_its_key(demo_data: Path, tmp_path: Path, speed: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        load_grid(str(grid_file(tmp_path, demo_data / "corpus", speed)), None)


def test_the_speed_section_is_optional_and_has_defaults(demo_data: Path, tmp_path: Path) -> None:
    grid = load_grid(str(grid_file(tmp_path, demo_data / "corpus", {})), None)
    assert grid.speed == SpeedSpec("test")
    assert grid.speed.beams == (1, 5) and grid.speed.engines == ("torch",)
