"""One ``adlnmt experiment`` command per output directory, and workers that do not outlive it.

:func:`lock_output` holds ``OUT/experiment.lock`` for the command's lifetime: a second command on the same
directory stops at once with a message naming the first one's process, instead of reporting the first one's runs
as failed. :func:`die_with_parent` (a ``preexec_fn``) asks Linux to send a worker SIGTERM when the thread that
started it ends, however it ends (``kill -9`` of the runner included): the worker checkpoints and exits instead of
training on as an orphan."""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from adlnmt.train.lock import DirectoryLock

LOCK_FILE = "experiment.lock"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def lock_output(out: Path) -> DirectoryLock:
    """The lock on the output directory ``out`` (created); UserError naming the other command's process."""
    return DirectoryLock(out, LOCK_FILE, "another adlnmt experiment", "output directory",
                         "wait for it to end, or give another --out")  # fmt: skip


def _parent_death_signal() -> Callable[[], None] | None:
    """A function that sets SIGTERM as this process's parent-death signal (None where Linux's prctl is missing)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl  # resolved before fork

    def die_with_parent() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    return die_with_parent


die_with_parent = _parent_death_signal()
