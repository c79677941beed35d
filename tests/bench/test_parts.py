"""The benchmark helpers: memory sampling, ratios, preset groups, argument lists and table formatting."""

from __future__ import annotations

import time

import pytest
import torch

from adlnmt.bench.commands import int_list
from adlnmt.bench.decode import add_ratios
from adlnmt.bench.machine import busy_warning, machine_line, machine_record
from adlnmt.bench.measure import STATM, PeakMemory, timed
from adlnmt.bench.models import PRESET_GROUPS, expand_presets
from adlnmt.bench.report import format_table
from adlnmt.errors import UserError
from adlnmt.presets import get_preset


@pytest.mark.skipif(not STATM.is_file(), reason="needs /proc/self/statm")
def test_peak_memory_sees_a_short_lived_allocation() -> None:
    with PeakMemory(torch.device("cpu")) as memory:
        block = torch.ones(64 * 1024 * 1024 // 4)  # 64 MiB, every page touched
        time.sleep(0.05)
        del block  # gone before the block ends: only the sampling thread can have seen it
    assert memory.added_mb > 48 and memory.peak_mb > memory.added_mb


def test_timed_keeps_the_fastest_run_and_the_last_result() -> None:
    calls = iter([0.03, 0.0, 0.02])
    timing = timed(lambda: time.sleep(next(calls)) or "done", torch.device("cpu"), repeat=3)
    assert timing.seconds < 0.015 and timing.result == "done"


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
