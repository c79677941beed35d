"""Helpers of the serve tests: a real ``adlnmt serve`` subprocess on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

import adlnmt

SRC = Path(adlnmt.__file__).resolve().parents[1]  # the adlnmt under test, also for subprocesses
ClientFactory = Callable[..., Any]  # the make_client fixture


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}


@contextmanager
def running_server(model_dir: Path, *flags: str, log: Path | None = None) -> Iterator[tuple[subprocess.Popen, str]]:
    """A real ``adlnmt serve`` subprocess (one thread) and its base URL, once ``GET /health`` answers; killed after
    if still running. Its output goes to ``log`` (or is dropped)."""
    port = free_port()
    command = [sys.executable, "-m", "adlnmt", "serve", "--model", str(model_dir), "--port", str(port),
               "--threads", "1", *flags]  # fmt: skip
    with open(log or os.devnull, "wb") as out:
        process = subprocess.Popen(command, env=serve_environment(), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                text = log.read_text() if log else ""
                raise AssertionError(f"adlnmt serve exited with {process.returncode} before answering: {text}")
            try:
                if httpx2.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "adlnmt serve did not answer /health within 120 s"
            time.sleep(0.2)
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
