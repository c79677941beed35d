"""Writing an export directory (read by :class:`adlnmt.store.ExportDir`): graphs or a converted model beside
everything needed to translate without the training files — the vocabulary (sentencepiece models and the data
manifest, in ``vocab/``), the model's ADL and options, the search defaults — described by ``export.json``, which also
keeps the SHA-256 of every other file.

An export is written to a temporary directory beside ``--out`` and renamed into place (:func:`staged`): a failure
(a full disk) leaves the previous export as it was, and a new export never keeps another format's files."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from adlnmt.atomic import leftovers_of_gone_processes
from adlnmt.errors import UserError
from adlnmt.inference.options import DEFAULT_OPTIONS
from adlnmt.interop.staging import check_outside
from adlnmt.store.atomic import fault_point, file_sha256, write_text_atomic
from adlnmt.store.export_dir import FILE_HASHES, FORMAT_VERSION, is_export_dir
from adlnmt.store.names import DIAGRAM, EXPORT_MANIFEST, VOCAB_DIR

if TYPE_CHECKING:  # numpy and PyTorch: not needed to parse `adlnmt export`'s arguments
    from adlnmt.data.data_dir import DataDir
    from adlnmt.model import Seq2Seq


def file_hashes(directory: Path) -> dict[str, str]:
    """SHA-256 of every file under ``directory`` but ``export.json``, by path relative to it (with ``/``)."""
    return {
        path.relative_to(directory).as_posix(): file_sha256(path)
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != EXPORT_MANIFEST
    }


def copy_vocab(data: DataDir, out: Path) -> None:
    """The data manifest and sentencepiece model(s) into ``out/vocab`` (enough for ``DataDir.load``)."""
    from adlnmt.data.data_dir import MANIFEST

    vocab = out / VOCAB_DIR
    vocab.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(data.path / MANIFEST, vocab / MANIFEST)
    for name in sorted(set(data.manifest["spm"].values())):
        shutil.copyfile(data.path / name, vocab / name)


@dataclass(frozen=True)
class Source:
    """What an export is made from: the model (eval mode, fp32) and its vocabulary and input limit."""

    model: Seq2Seq
    data: DataDir
    max_input_len: int
    model_dir: Path | None = None

    @property
    def positions(self) -> tuple[int, int]:
        """The positions the export covers on each side, (source, target): the model's max_len, or fewer where that
        side's smallest learned table (``learn_pos(max_len=N)``) ends, as the PyTorch search bounds each side."""
        max_len = self.model.config.max_len
        source, target = (max_len if limit is None else min(max_len, limit) for limit in self.model.position_limits())
        return source, target


def write_export(source: Source, out: Path, export_format: str, details: dict[str, Any]) -> None:
    """Write the vocabulary, the diagram and ``export.json`` (the ADL, parameter count, options and search
    defaults, plus ``details`` of the format) for the graphs or model already written to ``out``."""
    model = source.model
    copy_vocab(source.data, out)
    manifest = {
        "format": export_format,
        "format_version": FORMAT_VERSION,
        "model": model.config.to_dict(),
        "canonical": {"encoder": model.canonical_encoder, "decoder": model.canonical_decoder},
        "parameters": model.parameter_count(),
        "diagram": write_diagram(model, out),
        "source_model": str(source.model_dir) if source.model_dir else None,
        "max_input_len": source.max_input_len,
        "search_defaults": asdict(DEFAULT_OPTIONS),
        **details,
    }
    manifest[FILE_HASHES] = file_hashes(out)
    write_text_atomic(out / EXPORT_MANIFEST, json.dumps(manifest, indent=2) + "\n")


class Terminated(BaseException):
    """SIGTERM while an export is written (raised by the handler :func:`staged` installs, so that it cleans up)."""


def _terminate(number: int, frame: FrameType | None) -> None:
    raise Terminated


def tidy_leftovers(out: Path) -> None:
    """What an export killed by SIGKILL left beside ``out``: its temporary directory is removed and, where it was
    killed between moving the previous export aside and renaming the new one into place, the previous export is put
    back. Leftovers of a process still running (another export to ``out``) are left alone."""
    for kind in ("old", "tmp"):  # the previous export back first
        for path in leftovers_of_gone_processes(out, kind):
            if kind == "old" and not out.exists():
                path.rename(out)
            else:
                shutil.rmtree(path, ignore_errors=True)


@contextmanager
def staged(out: Path, model_dir: Path | None) -> Iterator[Path]:
    """A temporary directory beside ``out`` to write an export to, renamed to ``out`` when the body succeeds (a
    previous export there is replaced whole); on failure or SIGTERM it is removed, with the parent directories it
    created, and ``out`` is left as it was (SIGTERM: said on stderr, then the process ends by the signal). An
    OSError becomes a UserError naming the file (or ``out``). What a killed export left beside ``out`` is tidied
    first (:func:`tidy_leftovers`). Refuses an ``out`` that is the model directory or lies inside it
    (:func:`~adlnmt.interop.staging.check_outside`), or a directory holding something else than an export."""
    if model_dir is not None:
        check_outside(out, model_dir, "the export")
    if out.parent.is_dir():
        tidy_leftovers(out)
    if out.exists() and not (out.is_dir() and (is_export_dir(out) or not any(out.iterdir()))):
        raise UserError(f"{out}: exists and is not an export directory; choose another --out (or remove it)")
    temporary = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    previous = out.with_name(f".{out.name}.old-{os.getpid()}")
    created = [parent for parent in (out.parent, *out.parent.parents) if not parent.exists()]  # deepest first
    on_main_thread = threading.current_thread() is threading.main_thread()
    handler = signal.signal(signal.SIGTERM, _terminate) if on_main_thread else None
    late: list[int] = []  # a SIGTERM while cleaning up: noted, acted on after
    terminated = False
    try:
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir(parents=True)
        yield temporary
        if out.exists():
            out.rename(previous)
            fault_point(f"{out.name}:moved-aside")
        temporary.rename(out)
        shutil.rmtree(previous, ignore_errors=True)
    except OSError as err:
        if previous.exists() and not out.exists():
            previous.rename(out)
        where = err.filename or out
        raise UserError(f"{where}: cannot write the export ({err.strerror or err}); {out} is left as it was") from None
    except Terminated:
        terminated = True
        if previous.exists() and not out.exists():
            previous.rename(out)
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, lambda number, frame: late.append(number))
        shutil.rmtree(temporary, ignore_errors=True)
        if not out.exists():
            for parent in created:
                with suppress(OSError):  # something else was put there meanwhile
                    parent.rmdir()
        if on_main_thread:
            signal.signal(signal.SIGTERM, handler)
    if terminated:
        print(f"SIGTERM: export stopped, its temporary files removed; {out} is left as it was", file=sys.stderr,
              flush=True)  # fmt: skip
    if terminated or late:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def write_diagram(model: Seq2Seq, out: Path) -> str | None:
    """The architecture diagram as ``out/diagram.svg``, or None without Graphviz (:mod:`adlnmt.diagram`)."""
    from adlnmt.diagram import model_svg

    try:
        write_text_atomic(out / DIAGRAM, model_svg(model))
    except UserError:
        return None
    return DIAGRAM
