"""result.json read and written in one place: the committed archives load unchanged and save to the same text; a
damaged or foreign file is a clear error naming the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adlnmt.experiment.results import RESULT_FILE, ResultError, RunResult, read_result

from .sample_results import run_result, suite

ARCHIVE = Path(__file__).resolve().parents[2] / "experiments" / "results"


@pytest.mark.parametrize("path", sorted(ARCHIVE.glob(f"*/runs/*/seed-*/{RESULT_FILE}")), ids=str)
def test_an_archived_result_loads_and_saves_to_the_same_text(path: Path, tmp_path: Path) -> None:
    result = RunResult.load(path)
    assert result.tests and all(test.timing.buckets for test in result.tests.values())
    result.save(tmp_path / RESULT_FILE)
    assert (tmp_path / RESULT_FILE).read_text(encoding="utf-8") == path.read_text(encoding="utf-8")


def test_optional_parts_round_trip(tmp_path: Path) -> None:
    result = run_result(contrastive={"sva": suite([True, False])}, shared_from="other/runs/a/seed-1")
    result.save(tmp_path / RESULT_FILE)
    assert RunResult.load(tmp_path / RESULT_FILE) == result
    assert "retimed" not in json.loads((tmp_path / RESULT_FILE).read_text())  # left out where absent


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("tests"), r"not a run's result \(no 'tests'\)"),
        (lambda d: d["tests"]["test"].pop("buckets"), r"no 'tests.test.buckets'"),
        (lambda d: d.update(surprise=1), r"unknown key 'surprise'"),
        (lambda d: d["provenance"].update(machine_id=1), r"unknown key 'provenance.machine_id'"),
        (lambda d: d.update(curve={}), r"'curve' is not a list"),
        (lambda d: d.update(seed="1"), r"'seed' is not an int: '1'"),
        (lambda d: d.update(seed=True), r"'seed' is not an int: True"),
        (lambda d: d["tests"]["test"]["scores"].update(bleu="high"), r"'tests.test.scores.bleu' is not a float"),
    ],
)
def test_a_foreign_result_names_the_key(tmp_path: Path, change, message: str) -> None:
    value = run_result().to_dict()
    change(value)
    (tmp_path / RESULT_FILE).write_text(json.dumps(value))
    with pytest.raises(ResultError, match=message):
        RunResult.load(tmp_path / RESULT_FILE)
    assert read_result(tmp_path / RESULT_FILE) is None  # a run with such a result counts as not finished


def test_a_damaged_or_missing_file(tmp_path: Path) -> None:
    (tmp_path / RESULT_FILE).write_text('{"fingerprint": ')
    damaged = r"result.json: unreadable \(invalid JSON: Expecting value at line 1 column 17\)"
    with pytest.raises(ResultError, match=damaged):
        RunResult.load(tmp_path / RESULT_FILE)
    with pytest.raises(FileNotFoundError):
        RunResult.load(tmp_path / "missing.json")
    assert read_result(tmp_path / "missing.json") is None
