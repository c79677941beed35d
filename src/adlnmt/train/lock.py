"""One process per directory: an exclusive ``flock`` on a lock file in it (``MODEL/train.lock`` while a trainer
works on a model directory), released by the kernel however the process ends."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from adlnmt.errors import UserError
from adlnmt.store.names import LOCK


class DirectoryLock:
    """Holds the lock from construction until ``release``; UserError naming the holder's process when another
    process holds it (``holder``: what that process is, ``kind``: what the directory is, ``advice``: what to do)."""

    def __init__(
        self,
        directory: Path,
        name: str = LOCK,
        holder: str = "another training run",
        kind: str = "model directory",
        advice: str = "wait for it to end or choose another --model",
    ) -> None:
        if directory.exists() and not directory.is_dir():  # mkdir's error: "File exists"
            raise UserError(f"{directory}: a file, where the {kind} should be; choose another path")
        path = directory / name
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held open: the lock lives with it)
        except NotADirectoryError:  # mkdir's error: "Not a directory", naming no file of the path
            raise UserError(f"{directory}: cannot create the {kind}: a file where a folder of its path should "
                            "be; choose another path") from None  # fmt: skip
        except OSError as err:  # e.g. a read-only file system or folder
            raise UserError(f"{directory}: cannot write the {kind} ({err.strerror or err})") from None
        try:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._handle.seek(0)
            pid = self._handle.read().strip() or "?"
            self._handle.close()
            raise UserError(f"{directory}: {holder} (process {pid}) is using this {kind}; {advice}") from None
        self._handle.truncate(0)
        self._handle.write(f"{os.getpid()}\n")
        self._handle.flush()

    def __enter__(self) -> DirectoryLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:  # a lock held for a function's lifetime is released when it returns
        if hasattr(self, "_handle"):
            self.release()

    def release(self) -> None:
        if not self._handle.closed:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
