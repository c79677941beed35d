"""Writes a kill cannot tear, built on the one atomic write of :mod:`adlnmt.atomic` (re-exported here): commands'
outputs, copies, and JSON-lines records appended with an fsync and read back tolerating a partial last line."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from adlnmt.atomic import FAULT_HOOK as FAULT_HOOK
from adlnmt.atomic import FILE_MODE as FILE_MODE
from adlnmt.atomic import atomic_write as atomic_write
from adlnmt.atomic import fault_point as fault_point
from adlnmt.atomic import write_text_atomic as write_text_atomic
from adlnmt.data.corpus import decode_lines, read_lines
from adlnmt.errors import UserError
from adlnmt.jsontext import parse_json


def describe(err: BaseException) -> str:
    """An exception as a short reason (its type when it has no message, e.g. ``EOFError``)."""
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


STDIO = "-"
"""As an input or output path: standard input or output (the Unix convention)."""


def is_stdio(path: str | Path | None) -> bool:
    """Whether a command's input or output ``path`` is stdin/stdout: not given, or ``-``."""
    return path is None or str(path) in ("", STDIO)


def read_input(path: str | Path | None) -> Iterator[str]:
    """The lines of a command's input: the text file ``path`` (:func:`adlnmt.data.corpus.read_lines`), or standard
    input when it is not given or ``-``."""
    return decode_lines(sys.stdin.buffer, "<stdin>") if is_stdio(path) else read_lines(path)


def path_flag(text: str) -> str:
    """``type`` of a flag naming a file or folder: the path as given; an empty one (e.g. an unset shell variable) is
    refused rather than read as the flag left out (standard input or output, a default, or the working folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path (an unset shell variable?)")
    return text


def names_a_folder(path: str | Path) -> bool:
    """Whether ``path`` is a directory, or is written as one: ending in a separator (``Path("out/")`` is ``out``, so
    a write there would make the file ``out``)."""
    return Path(path).is_dir() or str(path).endswith(("/", os.sep))


def check_writable(*paths: str | None, inputs: Iterable[str | Path | None] = ()) -> None:
    """A UserError naming the first of ``paths`` (None or ``-``: stdout) that cannot be written: a directory (or a
    name ending in a separator, made or not), a read-only file, a file where a folder of its path should be, or a
    folder that takes no new file; or that is one of the command's ``inputs`` or another of ``paths`` (the write would
    replace it). Missing folders are fine: the write creates them (:func:`write_output`), so the nearest existing one
    is tried.
    Checked before the work whose results they hold."""
    taken: dict[Path, str] = {}
    for source in (p for p in inputs if not is_stdio(p)):
        taken.setdefault(Path(source).resolve(), f"the input {source}")
    for path in (p for p in paths if not is_stdio(p)):
        target = Path(path)
        if names_a_folder(path):
            raise UserError(f"{path}: a directory, not a file to write")
        if (other := taken.get(target.resolve())) and not is_special_file(target):
            raise UserError(f"{path}: the same file as {other}, which writing there would replace; choose another")
        taken[target.resolve()] = f"the output {path}"
        if target.exists() and not os.access(target, os.W_OK):
            raise UserError(f"{path}: cannot write (permission denied)")
        if target.exists() and not target.is_file():  # a device or pipe (/dev/stdout): written in place
            continue
        folder = target.absolute().parent
        while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
            folder = folder.parent  # a folder the write will create
        try:
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as err:
            raise UserError(f"{path}: cannot write ({err.strerror or err})") from None


def write_output(path: str | None, text: str) -> None:
    """A command's ``--output``: ``text`` written atomically to the file ``path`` (a failed write, e.g. on a full
    disk, names it and keeps the previous file); to stdout when None or ``-``, and in place to a special file (a
    pipe, ``/dev/stdout``), which cannot be replaced."""
    if not is_stdio(path) and not is_special_file(path):
        write_text_atomic(path, text)
        return
    try:
        if is_stdio(path):
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
    except BrokenPipeError:
        raise
    except OSError as err:
        raise UserError(f"{'<stdout>' if is_stdio(path) else path}: cannot write ({err.strerror or err})") from None


def is_special_file(path: str | Path) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a directory (a pipe, a character device)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def copy_atomic(source: Path, target: Path) -> None:
    """``source`` copied to ``target`` atomically (:func:`atomic_write`); a source that cannot be read is a
    UserError naming it, not the target."""
    try:
        reading = open(source, "rb")  # noqa: SIM115 (closed below, after the copy)
    except OSError as err:
        raise UserError(f"{source}: cannot read ({err.strerror or err})") from None

    def copy(tmp: Path) -> None:
        with open(tmp, "wb") as writing:
            shutil.copyfileobj(reading, writing)

    with reading:
        atomic_write(target, copy)


def append_line(path: Path, text: str) -> None:
    """Append one line and fsync it (so that it is on disk before the checkpoint it belongs to commits)."""
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as err:
        raise UserError(f"{path}: cannot write ({err.strerror or err})") from None


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in the file ``path``; a UserError naming the file when it is missing, damaged or not an
    object."""
    if not path.is_file():
        raise UserError(f"{path}: missing")
    try:
        value = parse_json(path.read_bytes())
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: damaged ({describe(err)})") from None
    if not isinstance(value, dict):
        raise UserError(f"{path}: malformed (expected a JSON object)")
    return value


def read_records(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The records of a JSON-lines file of checkpoint records (each an object with an integer ``update``) and a
    description of a partial last line (cut off by a crash or a full disk), None when there is none. A damaged line
    before the last one is a UserError naming it, and so is a directory in its place. No file: no records."""
    if path.is_dir():
        raise UserError(f"{path}: a directory, not a file of checkpoint records")
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
