"""The machine a benchmark ran on, recorded with every result file. PyTorch is imported only for the record of a
run on it (:func:`machine_record`); :func:`engine_machine_record` describes a run on an engine without it."""

from __future__ import annotations

import datetime
import os
import platform
import time
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def cpu_model() -> str:
    """The CPU's marketing name ('model name' of /proc/cpuinfo), else what ``platform`` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def usable_cores() -> int:
    """Logical cores this process may run on (the affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _host() -> dict[str, Any]:
    """CPU, cores, Python, platform, the date (UTC) and the load average."""
    return {
        "cpu": cpu_model(),
        "logical_cores": os.cpu_count() or 1,
        "usable_cores": usable_cores(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,  # 1, 5, 15 min, at the start
    }


def machine_record(device: torch.device) -> dict[str, Any]:
    """CPU, cores, torch threads and version, device, Python and the date (UTC)."""
    import torch

    host = _host()
    return {**host, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "device": str(device),
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else host["cpu"]}  # fmt: skip


def engine_machine_record(engine: str, threads: int) -> dict[str, Any]:
    """The record of a run on an engine without PyTorch (its package's version, ``threads`` CPU threads), with the
    host facts of :func:`machine_record`."""
    host = _host()
    return {**host, "engine": engine, "engine_version": version(engine), "engine_threads": threads, "device": "cpu",
            "device_name": host["cpu"]}  # fmt: skip


def machine_summary(record: dict[str, Any]) -> str:
    """CPU or GPU, cores, torch (or the engine) and its threads (a plot title)."""
    device = record["device_name"] if record["device"].startswith("cuda") else record["device"]
    if "torch" in record:
        cpu = f"{record['cpu']} ({record['cpu_capability']})"
        runtime = f"torch {record['torch']} with {record['torch_threads']} threads"
    else:
        cpu = record["cpu"]
        runtime = f"{record['engine']} {record['engine_version']} with {record['engine_threads']} threads"
    return f"{cpu}, {record['usable_cores']}/{record['logical_cores']} cores, {runtime}, {device}"


def machine_line(record: dict[str, Any]) -> str:
    """One line for the top of a printed table."""
    load = f", load {record['load_average'][0]:.1f}" if record["load_average"] else ""
    return f"machine: {machine_summary(record)}, python {record['python']}, {record['date']}{load}"


PROC_STAT = "ADLNMT_PROC_STAT"  # where the machine's CPU counters are read (/proc/stat; tests name a fixed file)
_BUSY_COLUMNS = (1, 2, 3, 6, 7)  # user, nice, system, irq, softirq of /proc/stat's "cpu" line (not idle, iowait, steal)
BUSY_BESIDE_LIMIT = 0.5  # cores: a timing with more of the machine busy with other processes is not a quiet one


def machine_busy_seconds(stat: Path | None = None) -> float | None:
    """CPU seconds all cores of the machine have spent busy since boot (user, nice, system, irq and softirq time of
    ``/proc/stat``, or the file ``$ADLNMT_PROC_STAT`` names), None where the system has no such file."""
    stat = stat or Path(os.environ.get(PROC_STAT, "/proc/stat"))
    try:
        first = stat.read_text(encoding="ascii").split("\n", 1)[0].split()
    except OSError:
        return None
    if len(first) <= max(_BUSY_COLUMNS) or first[0] != "cpu":
        return None
    return sum(int(first[column]) for column in _BUSY_COLUMNS) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU seconds of this process (all its threads) and of its children that have been waited for."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class BusyBeside:
    """How many cores other processes kept busy while something was measured: the machine's busy CPU time less this
    process's own and its waited-for children's (e.g. forked decoding workers), over the wall time since the object
    was made. A timing is a timing of the code alone where this is near 0 (at most ``BUSY_BESIDE_LIMIT``); it says
    nothing of a hypervisor's steal."""

    def __init__(self, stat: Path | None = None) -> None:
        self.stat = stat
        self.wall, self.own, self.machine = time.perf_counter(), own_cpu_seconds(), machine_busy_seconds(stat)

    def cores(self) -> float | None:
        """Cores busy with other processes on average so far (0 or more; clock ticks make it exact to about
        0.01 s over the wall time), None where the machine does not say."""
        machine = machine_busy_seconds(self.stat)
        wall = time.perf_counter() - self.wall
        if machine is None or self.machine is None or wall <= 0:
            return None
        return max(0.0, (machine - self.machine - (own_cpu_seconds() - self.own)) / wall)


def busy_note(cores: float | None) -> str:
    """``", 1.0 cores busy beside it"`` for a timing that was not quiet, else nothing."""
    return f", {cores:.1f} cores busy beside it" if cores is not None and cores > BUSY_BESIDE_LIMIT else ""


def busy_warning(record: dict[str, Any]) -> str | None:
    """A warning when other processes keep the CPU busy (the 1-minute load average exceeds half the usable
    cores): timings get noisy, and several torch threads on contended cores can be many times slower."""
    load = record["load_average"]
    if record["device"] != "cpu" or not load or load[0] <= record["usable_cores"] / 2:
        return None
    return (
        f"warning: load average {load[0]:.1f} on {record['usable_cores']} cores: other processes compete for the "
        "CPU, so timings will be noisy (an idle machine, or --threads 1, gives steadier figures)"
    )
