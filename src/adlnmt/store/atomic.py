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
import stat
import sys
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


def _file_mode() -> int:
    """The mode ``open()`` gives a new file under this process's umask (read once, at import: setting the umask to
    read it is not thread-safe)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


FILE_MODE = _file_mode()


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` then fsync and rename over ``path``: a kill leaves the old file or the new one. A failed write
    (e.g. a full disk) is a UserError naming ``path``; the old file stays. The file gets the mode of any other new
    file (:data:`FILE_MODE`), also where ``write`` made it private (safetensors writes 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.chmod(tmp, FILE_MODE)
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


def write_text_atomic(path: str | Path, text: str) -> None:
    """``text`` as the UTF-8 file ``path``, written atomically (:func:`atomic_write`)."""
    atomic_write(Path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_output(path: str | None, text: str) -> None:
    """A command's ``--output``: ``text`` written atomically to the file ``path`` (a failed write, e.g. on a full
    disk, names it and keeps the previous file); to stdout when None, and in place to a special file (a pipe,
    ``/dev/stdout``), which cannot be replaced."""
    if path and not is_special_file(path):
        write_text_atomic(path, text)
        return
    try:
        if path:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as err:
        raise UserError(f"{path or '<stdout>'}: cannot write ({err.strerror or err})") from None


def is_special_file(path: str | Path) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a directory (a pipe, a character device)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


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
