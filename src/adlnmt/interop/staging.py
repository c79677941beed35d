"""A directory written whole or not at all: filled beside its final name, renamed into place when complete."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from adlnmt.errors import UserError


def write_new_directory(out: Path, fill: Callable[[Path], None], what: str) -> None:
    """``fill(temporary)`` then rename it to ``out``; ``out`` must not exist (never overwritten). On any failure the
    temporary directory is removed and ``out`` does not exist; an OSError becomes a UserError naming the file."""
    if out.exists():
        raise UserError(f"{out}: exists; choose a new --out ({what} never overwrites)")
    temporary = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        temporary.mkdir(parents=True)
        fill(temporary)
        temporary.rename(out)
    except OSError as err:
        raise UserError(f"{err.filename or out}: cannot write {what} ({err.strerror or err})") from None
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
