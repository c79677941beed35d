"""One trainer per model directory: an exclusive ``flock`` on ``MODEL/train.lock`` while a trainer works on it
(released by the kernel however the process ends)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from adlnmt.errors import UserError

LOCK_FILE = "train.lock"


class DirectoryLock:
    """Holds the lock from construction until ``release``; UserError when another process holds it."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / LOCK_FILE
        self._handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held open: the lock lives with it)
        try:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._handle.seek(0)
            holder = self._handle.read().strip() or "?"
            self._handle.close()
            raise UserError(
                f"{directory}: another training run (process {holder}) is using this model directory; "
                "wait for it to end or choose another --model"
            ) from None
        self._handle.truncate(0)
        self._handle.write(f"{os.getpid()}\n")
        self._handle.flush()

    def release(self) -> None:
        if not self._handle.closed:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
