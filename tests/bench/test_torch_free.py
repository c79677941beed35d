"""``adlnmt bench decode`` on a CTranslate2 export runs without importing PyTorch (issue 46): in a fresh interpreter,
with ``--engine ctranslate2`` and with ``auto``, it writes the beam table (decode.csv, decode.json) as the torch
engine does, over exactly the engine's output, with a machine record taken from the process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adlnmt.bench.machine import engine_machine_record, machine_line
from adlnmt.cli import main
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.translator import Translator
from bench.test_bench import RATES, assert_positive, read_csv
from test_startup import run_cli

ctranslate2 = pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'adlnmt[ct2]'")


@pytest.fixture(scope="module")
def source(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six test sentences and an empty line (skipped, as --model skips it with the torch engine)."""
    lines = (demo_data / "corpus" / "test.src").read_text(encoding="utf-8").splitlines()[:6]
    path = tmp_path_factory.mktemp("bench-ct2") / "input.txt"
    path.write_text("\n".join([*lines[:3], "", *lines[3:]]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("engine", ["ctranslate2", "auto"])
def test_bench_decode_on_a_ctranslate2_export_imports_no_torch(
    ct2_export: Path, source: Path, tmp_path: Path, engine: str
) -> None:
    out = tmp_path / "out"
    argv = ["bench", "decode", "--engine", engine, "--model", str(ct2_export), "--input", str(source),
            "--beams", "2,1", "--batch-size", "4", "--threads", "1", "--out", str(out)]  # fmt: skip
    code, loaded, result = run_cli(argv)
    assert code == 0, result.stderr
    assert "torch" not in loaded and "ctranslate2" in loaded

    rows = read_csv(out / "decode.csv")
    assert [(r["decoder"], r["kind"], r["beam"], r["mode"]) for r in rows] == [
        ("ct2", "model", "1", "cached"), ("ct2", "model", "2", "cached")]  # fmt: skip
    assert_positive(rows, RATES)
    assert all(r["sentences"] == "6" and float(r["speedup_vs_baseline"]) == 1 for r in rows)
    translator = Translator.load(ct2_export, engine="ctranslate2", threads=1)
    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line]
    sources = [translator.encode(line, number) for number, line in enumerate(lines, 1)]
    assert translator.engine is not None
    for row in rows:
        found = translator.engine.translate_ids(sources, SearchOptions(beam=int(row["beam"]), batch_size=4))
        assert int(row["target_tokens"]) == sum(len(hyps[0].tokens) for hyps in found) > 0
    assert not (out / "length.csv").exists()  # forced output lengths need the PyTorch search

    record = json.loads((out / "decode.json").read_text(encoding="utf-8"))
    machine = record["machine"]
    assert machine["engine"] == "ctranslate2" and machine["engine_version"] == ctranslate2.__version__
    assert machine["engine_threads"] == 1 and machine["device"] == "cpu" and "torch" not in machine
    assert {"cpu", "logical_cores", "usable_cores", "python", "date", "load_average"} <= set(machine)
    assert "RSS" in machine["memory"]
    assert len(record["decode"]) == 2 and record["settings"]["engine"] == engine
    printed = result.stdout
    assert printed.startswith(f"machine: {machine['cpu']}, ")
    assert f"ctranslate2 {ctranslate2.__version__} with 1 threads" in printed
    assert "ct2" in printed.split("\n\n")[-1]  # the table


def test_machine_line_of_an_engine_run() -> None:
    line = machine_line(engine_machine_record("ctranslate2", 3))
    assert line.startswith("machine: ") and f"ctranslate2 {ctranslate2.__version__} with 3 threads, cpu" in line


def test_a_ctranslate2_export_is_benchmarked_on_the_cpu(
    ct2_export: Path, source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "decode", "--engine", "ctranslate2", "--model", str(ct2_export), "--input", str(source),
            "--device", "cuda", "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    assert "--device cuda: the ctranslate2 engine runs on the CPU" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
