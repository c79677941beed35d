"""The machine a benchmark ran on, recorded with every result file."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path
from typing import Any

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


def machine_record(device: torch.device) -> dict[str, Any]:
    """CPU, cores, torch threads and version, device, Python and the date (UTC)."""
    return {
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "logical_cores": os.cpu_count() or 1,
        "usable_cores": usable_cores(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,  # 1, 5, 15 min, at the start
    }


def machine_summary(record: dict[str, Any]) -> str:
    """CPU or GPU, cores, torch and its threads (a plot title)."""
    device = record["device_name"] if record["device"].startswith("cuda") else record["device"]
    return (
        f"{record['cpu']} ({record['cpu_capability']}), {record['usable_cores']}/{record['logical_cores']} cores, "
        f"torch {record['torch']} with {record['torch_threads']} threads, {device}"
    )


def machine_line(record: dict[str, Any]) -> str:
    """One line for the top of a printed table."""
    load = f", load {record['load_average'][0]:.1f}" if record["load_average"] else ""
    return f"machine: {machine_summary(record)}, python {record['python']}, {record['date']}{load}"


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
