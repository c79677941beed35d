"""Writes a kill cannot tear: a file is written to a temporary beside it, fsynced and renamed over it; JSON-lines
records are appended with an fsync and read back tolerating a partial last line. Every atomic write passes the
fault-injection points of :func:`fault_point` (the fault tests kill or fail a process there)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from safetensors import SafetensorError

from adlnmt.errors import UserError
from adlnmt.jsontext import parse_json

FAULT_HOOK = "ADLNMT_FAULT_HOOK"


def fault_point(point: str) -> None:
    """Test hook. With ``ADLNMT_FAULT_HOOK=ACTION@GLOB``, a point whose name matches GLOB (fnmatch) kills this process
    (``kill``: SIGKILL), signals it (``term``: SIGTERM, ``int``: SIGINT) or fails as on a full disk (``enospc``).
    Every atomic write of a file NAME passes ``NAME:written`` (temporary file complete, not yet renamed) and
    ``NAME:replaced``."""
    action, _, pattern = os.environ.get(FAULT_HOOK, "").partition("@")
    if not pattern or not fnmatch(point, pattern):
        return
    if action == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    os.kill(os.getpid(), {"kill": signal.SIGKILL, "term": signal.SIGTERM, "int": signal.SIGINT}[action])


def describe(err: BaseException) -> str:
    """An exception as a short reason (its type when it has no message, e.g. ``EOFError``)."""
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` then fsync and rename over ``path``: a kill leaves the old file or the new one. A failed write
    (e.g. a full disk) is a UserError naming ``path``; the old file stays."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        fault_point(f"{path.name}:written")
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except (OSError, SafetensorError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise UserError(f"{path}: cannot write ({reason}); its previous version is intact") from None
    finally:
        tmp.unlink(missing_ok=True)
    fault_point(f"{path.name}:replaced")


def copy_atomic(source: Path, target: Path) -> None:
    atomic_write(target, lambda tmp: shutil.copyfile(source, tmp))


def append_line(path: Path, text: str) -> None:
    """Append one line and fsync it (so that it is on disk before the checkpoint it belongs to commits)."""
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as err:
        raise UserError(f"{path}: cannot write ({err.strerror or err})") from None


def read_records(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The records of a JSON-lines file of checkpoint records (each an object with an integer ``update``) and a
    description of a partial last line (cut off by a crash or a full disk), None when there is none. A damaged line
    before the last one is a UserError naming it. No file: no records."""
    if not path.is_file():
        return [], None
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    records, partial = [], None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = parse_json(line)
            if not isinstance(record, dict) or not isinstance(record.get("update"), int):
                raise ValueError("not a checkpoint record")
        except ValueError as err:
            if any(rest.strip() for rest in lines[number:]):
                raise UserError(f"{path}:{number}: damaged record ({describe(err)})") from None
            partial = f"{path}:{number}: partial last line dropped ({line[:40]!r})"
            continue
        records.append(record)
    return records, partial


def write_records(path: Path, records: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(record) + "\n" for record in records)
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def file_sha256(path: Path) -> str:
    """SHA-256 of the file's content; UserError naming it when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as err:
        raise UserError(f"{path}: cannot read ({err.strerror or err})") from None
