"""The single-node SLURM of scripts/slurm/start.sh for the tests marked ``slurm``: started (installed where missing)
once per session, or the tests skip with the script's reason (not root, no apt-get, no submitit)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

START = Path(__file__).resolve().parents[1] / "scripts" / "slurm" / "start.sh"
CANNOT_START = 77  # start.sh's exit status where a cluster cannot be started here


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    pytest.importorskip("submitit", reason="submitit is not installed (pip install 'adlnmt[slurm]')")
    done = subprocess.run(["bash", str(START)], capture_output=True, text=True, timeout=900, check=False)
    if done.returncode == CANNOT_START:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, f"{START} failed:\n{done.stdout}\n{done.stderr}"


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 300) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` if it does not within ``seconds`` (a hang guard)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what} after {seconds:.0f} s")
        time.sleep(0.05)
