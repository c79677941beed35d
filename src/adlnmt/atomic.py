"""The atomic write: a file is written to a temporary beside it, fsynced and renamed over it, so a kill leaves the
old file or the new one, never a torn one. Every atomic write passes the fault-injection points of
:func:`fault_point` (the fault tests kill or fail a process there). It sits below every package that writes files
(``data`` included); :mod:`adlnmt.store.atomic` builds commands' outputs and JSON-lines records on it."""

from __future__ import annotations

import errno
import glob
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from fnmatch import fnmatch
from pathlib import Path
from typing import TextIO

from safetensors import SafetensorError

from adlnmt.errors import UserError

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


def _make_folder(path: Path) -> None:
    """The folder of ``path`` (and its missing parents); a UserError naming ``path`` where it cannot be made."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as err:  # a file where a folder of the path should be
        raise UserError(f"{path}: cannot write ({err.filename or path.parent} is not a folder)") from None
    except OSError as err:
        raise UserError(f"{path}: cannot write (its folder: {err.strerror or err})") from None


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` is running (another user's included)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: a PID no process can have
        return False
    except PermissionError:  # another user's process
        return True
    return True


def left_by_a_gone_process(path: Path) -> bool:
    """Whether the temporary ``path``, named for the process that made it (``.NAME.tmp-PID``, :func:`atomic_write`;
    other writers' ``.NAME.KIND-PID``), was left by a process that is no longer running (killed mid-write): never
    this process's, nor a live one's."""
    pid = path.name.rpartition("-")[2]
    return pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid))


def leftovers_of_gone_processes(path: Path, kind: str) -> list[Path]:
    """The ``.NAME.KIND-PID`` beside ``path`` (NAME its name, matched literally; PID all digits) left by processes no
    longer running (:func:`left_by_a_gone_process`), sorted; files and folders alike."""
    prefix = f".{path.name}.{kind}-"
    return [
        found
        for found in sorted(path.parent.glob(f"{glob.escape(prefix)}*"))
        if found.name.removeprefix(prefix).isdigit() and left_by_a_gone_process(found)
    ]


def remove_stale_temporaries(paths: Sequence[Path]) -> list[Path]:
    """Remove the temporaries of ``paths`` that writes killed before their rename left beside them (of a process no
    longer running: :func:`leftovers_of_gone_processes`); returns them. One that cannot be removed is a UserError."""
    removed = []
    for path in paths:
        for tmp in leftovers_of_gone_processes(path, "tmp"):
            if tmp.is_file():
                try:
                    tmp.unlink(missing_ok=True)
                except OSError as err:
                    raise UserError(f"{tmp}: cannot remove this temporary left by a killed write of {path.name} "
                                    f"({err.strerror or err})") from None  # fmt: skip
                removed.append(tmp)
    return removed


def _failed(path: Path, err: OSError | SafetensorError) -> UserError:
    reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
    return UserError(f"{path}: cannot write ({reason}); its previous version is intact")


def _complete(tmp: Path, path: Path) -> None:
    """The temporary ``tmp`` of ``path``, written: its mode set and its data fsynced."""
    os.chmod(tmp, FILE_MODE)
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    fault_point(f"{path.name}:written")


def _replace(tmp: Path, path: Path) -> None:
    os.replace(tmp, path)
    fsync_dir(path.parent)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` then fsync and rename over ``path``: a kill leaves the old file or the new one. A failed write
    (e.g. a full disk) is a UserError naming ``path``; the old file stays. The file gets the mode of any other new
    file (:data:`FILE_MODE`), also where ``write`` made it private (safetensors writes 0600)."""
    _make_folder(path)
    tmp = _temporary(path)
    try:
        write(tmp)
        _complete(tmp, path)
        _replace(tmp, path)
    except (OSError, SafetensorError) as err:
        raise _failed(path, err) from None
    finally:
        tmp.unlink(missing_ok=True)
    fault_point(f"{path.name}:replaced")


@contextmanager
def atomic_text_streams(paths: Sequence[Path]) -> Iterator[Callable[[int, str], None]]:
    """Text streamed into the files ``paths``, each written as by :func:`atomic_write` (with its fault points), for
    files too large to hold in memory: ``write(i, text)`` appends ``text`` (UTF-8, newlines as given) to a temporary
    beside ``paths[i]``. When the body ends and every temporary is complete (fsynced), each is renamed over its path in
    turn (a kill between two renames leaves each file whole, old or new); should the body or any file fail before,
    none is and no file changes. A failed write is a UserError naming the file; the temporaries are always removed."""
    for path in paths:
        _make_folder(path)
    temporaries = [_temporary(path) for path in paths]
    handles: list[TextIO] = []

    def write(index: int, text: str) -> None:
        try:
            handles[index].write(text)
        except OSError as err:
            raise _failed(paths[index], err) from None

    try:
        for path, tmp in zip(paths, temporaries, strict=True):
            try:
                handles.append(tmp.open("w", encoding="utf-8", newline="\n"))
            except OSError as err:
                raise _failed(path, err) from None
        yield write
        for path, tmp, handle in zip(paths, temporaries, handles, strict=True):  # all complete before any is renamed
            try:
                handle.close()
                _complete(tmp, path)
            except OSError as err:
                raise _failed(path, err) from None
        for path, tmp in zip(paths, temporaries, strict=True):
            try:
                _replace(tmp, path)
            except OSError as err:
                raise _failed(path, err) from None
            fault_point(f"{path.name}:replaced")
    finally:
        for handle in handles:
            with suppress(OSError):  # already closed, or its buffered text failed to write: reported above
                handle.close()
        for tmp in temporaries:
            tmp.unlink(missing_ok=True)


def write_text_atomic(path: str | Path, text: str) -> None:
    """``text`` as the UTF-8 file ``path``, written atomically (:func:`atomic_write`)."""
    atomic_write(Path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"))
