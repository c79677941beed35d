"""A directory written whole or not at all: filled beside its final name, renamed into place when complete."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from adlnmt.atomic import leftovers_of_gone_processes
from adlnmt.errors import UserError


def check_outside(out: Path, source: Path, what: str) -> None:
    """Refuse ``out`` as the output of ``what`` where it is the folder ``source`` that ``what`` reads or lies inside it
    (after resolving links, ``.`` and ``..``): the output would change its input."""
    if source.resolve() in (target := out.resolve(), *target.parents):
        where = "the folder" if target == source.resolve() else "inside"
        raise UserError(f"{out}: {where} {source}, which {what} reads (writing there would change it); choose a "
                        "--out outside it")  # fmt: skip


def check_new_directory(out: Path, what: str, source: Path | None = None) -> None:
    """Refuse ``out`` as the new directory of ``what`` (checked before anything is read or written): it is the folder
    ``source`` read from or lies inside it (:func:`check_outside`), it exists, or the folder it would be made in is a
    file."""
    if source is not None:
        check_outside(out, source, what)
    if out.exists():
        raise UserError(f"{out}: exists; choose a new --out ({what} never overwrites)")
    parent = next((folder for folder in out.parents if folder.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UserError(f"{out}: cannot write {what}: {parent} is not a folder")


def remove_stale_directories(out: Path) -> None:
    """Remove the temporary directories ``.OUT.tmp-PID`` that runs killed before their rename (SIGKILL) left beside
    ``out``, of processes no longer running (:func:`~adlnmt.atomic.leftovers_of_gone_processes`); each is said on
    stderr. One that cannot be removed is left (it does not stand in the way)."""
    for temporary in leftovers_of_gone_processes(out, "tmp"):
        shutil.rmtree(temporary, ignore_errors=True)
        if not temporary.exists():
            print(f"removed {temporary}, left by a run that was killed", file=sys.stderr)


def write_new_directory(out: Path, fill: Callable[[Path], None], what: str) -> None:
    """``fill(temporary)`` then rename it to ``out``; ``out`` must not exist (never overwritten). What killed runs
    left beside ``out`` is removed first (:func:`remove_stale_directories`). On any failure the temporary directory
    is removed and ``out`` does not exist; an OSError becomes a UserError naming the file (as it would be named in
    ``out``)."""
    check_new_directory(out, what)
    remove_stale_directories(out)
    temporary = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        temporary.mkdir(parents=True)
        fill(temporary)
        temporary.rename(out)
    except OSError as err:
        where = str(err.filename or out).replace(str(temporary), str(out), 1)
        raise UserError(f"{where}: cannot write {what} ({err.strerror or err})") from None
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
