"""The benchmark helpers: memory sampling, ratios, preset groups, argument lists and table formatting."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from adlnmt.bench import machine
from adlnmt.bench.commands import int_list
from adlnmt.bench.decode import add_ratios
from adlnmt.bench.machine import (
    PROC_STAT,
    BusyBeside,
    busy_note,
    busy_warning,
    machine_busy_seconds,
    machine_line,
    machine_record,
    own_cpu_seconds,
)
from adlnmt.bench.measure import STATM, PeakMemory, timed
from adlnmt.bench.models import PRESET_GROUPS, expand_presets, input_lines
from adlnmt.bench.report import format_table
from adlnmt.errors import UserError
from adlnmt.presets import get_preset


@pytest.mark.skipif(not STATM.is_file(), reason="needs /proc/self/statm")
def test_peak_memory_sees_a_short_lived_allocation() -> None:
    with PeakMemory(torch.device("cpu")) as memory:
        block = torch.ones(64 * 1024 * 1024 // 4)  # 64 MiB, every page touched
        deadline = time.monotonic() + 60  # a loaded machine may leave the sampling thread waiting
        while memory._peak - memory._start < 48 * 1024 * 1024 and time.monotonic() < deadline:
            time.sleep(0.01)
        del block  # gone before the block ends: only the sampling thread can have seen it
    assert memory.added_mb > 48 and memory.peak_mb > memory.added_mb


def test_timed_keeps_the_fastest_run_and_the_last_result(monkeypatch: pytest.MonkeyPatch) -> None:
    # a clock that moves only when a run says it took time: the test cannot depend on the machine's load
    clock = SimpleNamespace(now=100.0)
    monkeypatch.setattr(time, "perf_counter", lambda: clock.now)
    durations, results = iter([0.03, 0.01, 0.02]), iter(["first", "second", "last"])

    def run() -> str:
        clock.now += next(durations)
        return next(results)

    timing = timed(run, torch.device("cpu"), repeat=3)
    assert timing.seconds == pytest.approx(0.01) and timing.result == "last"


def test_ratios_against_the_baseline_and_between_modes() -> None:
    rows = [
        {"decoder": d, "beam": 1, "mode": m, "seconds": s}
        for d, m, s in [("t", "cached", 2.0), ("t", "uncached", 8.0), ("aan", "cached", 1.0), ("aan", "uncached", 2.0)]
    ]
    add_ratios(rows, "t")
    assert [r["speedup_vs_baseline"] for r in rows] == [1.0, 1.0, 2.0, 4.0]
    assert [r["cache_speedup"] for r in rows] == [4.0, 4.0, 2.0, 2.0]
    lonely = [{"decoder": "x", "beam": 4, "mode": "cached", "seconds": 1.0, "length": 10}]
    add_ratios(lonely, "t")
    assert lonely[0]["speedup_vs_baseline"] is None and lonely[0]["cache_speedup"] is None


def test_preset_groups_expand_in_order_without_repeats() -> None:
    for members in PRESET_GROUPS.values():
        for name in members:
            get_preset(name)
    assert expand_presets(["transformer,@aan", "t5-rnn-rnn", "transformer"]) == [
        "transformer", "transformer-aan", "transformer-aan-noffn", "transformer-aan-nogate", "transformer-postnorm",
        "t5-rnn-rnn"]  # fmt: skip
    assert len(expand_presets(["@table5"])) == 9
    with pytest.raises(UserError, match="unknown preset 'nope'"):
        expand_presets(["nope"])


def test_int_list() -> None:
    assert int_list("--beams", "20,1, 4,4") == [1, 4, 20]
    for bad in ("", "1,-2", "a", "0"):
        with pytest.raises(UserError, match="--beams expects"):
            int_list("--beams", bad)


def test_table_alignment_and_machine_line() -> None:
    columns = [("name", "name", str), ("rate", "rate/s", lambda v: f"{v:.1f}")]
    text = format_table([{"name": "aan", "rate": 12.34}, {"name": "transformer", "rate": None}], columns)
    assert text.splitlines() == ["name         rate/s", "-----------  ------", "aan            12.3",
                                 "transformer       -"]  # fmt: skip
    line = machine_line(machine_record(torch.device("cpu")))
    assert line.startswith("machine: ") and f"torch {torch.__version__}" in line


def test_busy_machine_warning() -> None:
    record = {**machine_record(torch.device("cpu")), "usable_cores": 2}
    assert busy_warning({**record, "load_average": [0.4, 1.0, 1.0]}) is None
    assert "load average 3.5 on 2 cores" in busy_warning({**record, "load_average": [3.5, 1.0, 1.0]})
    assert busy_warning({**record, "load_average": None}) is None


def test_busy_beside_counts_the_cpu_time_of_other_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stat = tmp_path / "stat"
    ticks = os.sysconf("SC_CLK_TCK")

    def counters(user: float, system: float) -> None:  # idle, iowait and steal (500, 7, 9 s) are not busy
        fields = [user, 2.0, system, 500.0, 7.0, 1.0, 1.0, 9.0, 0.0, 0.0]
        stat.write_text("cpu  " + " ".join(str(round(f * ticks)) for f in fields) + "\ncpu0 1 2 3 4 5 6 7 8 9 0\n")

    counters(10.0, 3.0)
    assert machine_busy_seconds(stat) == pytest.approx(10.0 + 2.0 + 3.0 + 1.0 + 1.0)
    wall, own = iter([100.0, 102.0, 104.0]), iter([5.0, 6.0, 9.0])
    monkeypatch.setattr(machine, "time", SimpleNamespace(perf_counter=lambda: next(wall)))
    monkeypatch.setattr(machine, "own_cpu_seconds", lambda: next(own))
    beside = BusyBeside(stat)
    counters(12.0, 5.0)  # the machine was busy 4 s in 2 s of wall time, this process 1 s of it
    assert beside.cores() == pytest.approx(1.5)
    assert beside.cores() == 0.0  # this process alone (4 s of its own in 4 s): nothing beside it, never below 0
    assert busy_note(1.5) == ", 1.5 cores busy beside it" and busy_note(0.5) == busy_note(None) == ""


def test_own_cpu_time_counts_waited_for_children() -> None:
    """Forked decoding workers are this measurement's own work, not other processes'."""
    before = own_cpu_seconds()
    child = os.fork()
    if child == 0:  # burn about 0.3 s of CPU, then leave without running the parent's cleanup
        deadline = time.process_time() + 0.3
        while time.process_time() < deadline:
            pass
        os._exit(0)
    os.waitpid(child, 0)
    assert own_cpu_seconds() - before >= 0.25


def test_busy_beside_is_unknown_without_the_counters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert machine_busy_seconds(tmp_path / "absent") is None
    (tmp_path / "garbled").write_text("intr 1 2 3\n")
    assert machine_busy_seconds(tmp_path / "garbled") is None
    monkeypatch.setenv(PROC_STAT, str(tmp_path / "absent"))
    assert BusyBeside().cores() is None


def test_input_lines_read_gzip_as_text_and_locate_bad_bytes(tmp_path: Path) -> None:
    """A gzip test set is its text (read as bytes it would time the translation of garbage); bad UTF-8 is an error
    at its line, not a replacement character."""
    with gzip.open(tmp_path / "test.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("Ein Mann läuft.\n\nZwei Hunde spielen.\nDrei Kinder.\n")
    assert input_lines(tmp_path / "test.de.gz", 2) == ["Ein Mann läuft.", "Zwei Hunde spielen."]
    (tmp_path / "bad.de").write_bytes(b"gut\nkaputt \xff\n")
    with pytest.raises(UserError, match=r"bad\.de:2: invalid UTF-8"):
        input_lines(tmp_path / "bad.de")
