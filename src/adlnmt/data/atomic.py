"""Atomic writes of a data directory's files: a temporary beside the file, fsynced, renamed over it, so that a kill
leaves the old file or the new one. (The model directory's writes, with their fault-injection points, are
:mod:`adlnmt.store.atomic`, a layer above data.)"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from adlnmt.errors import DataError


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` then fsync and rename over ``path``; a failed write (e.g. a full disk) is a DataError naming
    ``path``, and no temporary is left behind."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as err:
        raise DataError(f"cannot write ({err.strerror or err})", path) from None
    finally:
        tmp.unlink(missing_ok=True)
