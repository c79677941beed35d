"""An export directory: graphs or a converted model beside everything needed to translate without the
training files — the vocabulary (sentencepiece models and the data manifest, in ``vocab/``), the model's ADL
and options, the search defaults — described by ``export.json``, which also keeps the SHA-256 of every other file.

An export is written to a temporary directory beside ``--out`` and renamed into place (:func:`staged`): a failure
(a full disk) leaves the previous export as it was, and a new export never keeps another format's files. Loading
checks ``export.json`` and every file against its hash: a damaged export is an error naming the file."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from adlnmt.errors import UserError
from adlnmt.inference.options import DEFAULT_OPTIONS

if TYPE_CHECKING:  # numpy and PyTorch: not needed to parse `adlnmt export`'s arguments
    from adlnmt.data.dataset import DataDir
    from adlnmt.model import Seq2Seq

EXPORT_MANIFEST = "export.json"
DIAGRAM = "diagram.svg"  # the architecture, drawn at export time for `adlnmt serve` without PyTorch
FORMAT_VERSION = 1
FORMATS = ("onnx", "ctranslate2")
FILE_HASHES = "files"  # export.json's entry: path relative to the export → SHA-256 of its content
# export.json's entries a loader reads, with their types
MANIFEST_ENTRIES: dict[str, type | tuple[type, ...]] = {"model": dict, "max_input_len": int, "quantize": str}
QUANTIZATIONS = ("none", "int8")  # of the weights (dynamic int8: activations quantised on the fly)


@dataclass
class ExportDir:
    """A loaded export directory: its manifest and vocabulary."""

    path: Path
    manifest: dict[str, Any]
    data: DataDir

    @property
    def format(self) -> str:
        return str(self.manifest["format"])

    @property
    def max_input_len(self) -> int:
        return int(self.manifest["max_input_len"])

    @classmethod
    def load(cls, path: str | Path) -> ExportDir:
        """The export in ``path``, its manifest and files checked; UserError naming the first damaged file."""
        path = Path(path)
        manifest_path = path / EXPORT_MANIFEST
        if not manifest_path.is_file():
            raise UserError(f"{path}: not an export directory (no {EXPORT_MANIFEST}; run `adlnmt export`)")
        manifest = read_manifest(manifest_path)
        check_files(path, manifest.get(FILE_HASHES), manifest_path)
        from adlnmt.data.dataset import DataDir

        return cls(path, manifest, DataDir.load(path / "vocab"))


def read_manifest(manifest_path: Path) -> dict[str, Any]:
    """``export.json`` with the entries a loader reads checked; UserError naming it when damaged or malformed."""
    try:
        manifest = json.loads(manifest_path.read_bytes().decode("utf-8"))
    except (OSError, ValueError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise UserError(f"{manifest_path}: damaged ({type(err).__name__}); export the model again") from None
    if not isinstance(manifest, dict):
        raise UserError(f"{manifest_path}: malformed (expected a JSON object); export the model again")
    if manifest.get("format_version") != FORMAT_VERSION or manifest.get("format") not in FORMATS:
        raise UserError(f"{manifest_path}: unsupported export (format {manifest.get('format')!r}, "
                        f"version {manifest.get('format_version')!r})")  # fmt: skip
    expected = {**MANIFEST_ENTRIES, manifest["format"]: dict}
    wrong = [name for name, kind in expected.items() if not isinstance(manifest.get(name), kind)]
    if wrong or isinstance(manifest["max_input_len"], bool) or manifest["max_input_len"] < 1:
        raise UserError(f"{manifest_path}: malformed ({', '.join(wrong) or 'max_input_len'} missing or of the "
                        "wrong type); export the model again")  # fmt: skip
    return manifest


def file_hashes(directory: Path) -> dict[str, str]:
    """SHA-256 of every file under ``directory`` but ``export.json``, by path relative to it (with ``/``)."""
    return {
        path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != EXPORT_MANIFEST
    }


def check_files(directory: Path, hashes: Any, manifest_path: Path) -> None:
    """UserError naming the first file listed in ``hashes`` that is missing or whose content changed (nothing to
    check for an export from before exports listed their files)."""
    if hashes is None:
        return
    if not isinstance(hashes, dict) or not all(isinstance(value, str) for value in hashes.values()):
        raise UserError(f"{manifest_path}: malformed ({FILE_HASHES} is not a mapping of file: SHA-256)")
    for name, expected in sorted(hashes.items()):
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts:
            raise UserError(f"{manifest_path}: malformed (lists the file {name!r} outside the export)")
        path = directory / relative
        if not path.is_file():
            raise UserError(f"{path}: missing from the export; export the model again")
        if hashlib.sha256(path.read_bytes()).hexdigest() != expected:
            raise UserError(f"{path}: damaged (its content differs from what {manifest_path} records); "
                            "export the model again")  # fmt: skip


def is_export_dir(path: str | Path) -> bool:
    return (Path(path) / EXPORT_MANIFEST).is_file()


def copy_vocab(data: DataDir, out: Path) -> None:
    """The data manifest and sentencepiece model(s) into ``out/vocab`` (enough for ``DataDir.load``)."""
    from adlnmt.data.prepare import MANIFEST

    vocab = out / "vocab"
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
    (out / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


@contextmanager
def staged(out: Path, model_dir: Path | None) -> Iterator[Path]:
    """A temporary directory beside ``out`` to write an export to, renamed to ``out`` when the body succeeds (a
    previous export there is replaced whole); on failure it is removed, with the parent directories it created, and
    ``out`` is left as it was. An OSError becomes a UserError naming the file (or ``out``). Refuses an ``out`` that
    is the model directory, or a directory holding something else than an export."""
    if model_dir is not None and out.resolve() == model_dir.resolve():
        raise UserError(f"{out}: is the model directory; choose another --out for the export")
    if out.exists() and not (out.is_dir() and (is_export_dir(out) or not any(out.iterdir()))):
        raise UserError(f"{out}: exists and is not an export directory; choose another --out (or remove it)")
    temporary = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    previous = out.with_name(f".{out.name}.old-{os.getpid()}")
    created = [parent for parent in (out.parent, *out.parent.parents) if not parent.exists()]  # deepest first
    try:
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir(parents=True)
        yield temporary
        if out.exists():
            out.rename(previous)
        temporary.rename(out)
        shutil.rmtree(previous, ignore_errors=True)
    except OSError as err:
        if previous.exists() and not out.exists():
            previous.rename(out)
        where = err.filename or out
        raise UserError(f"{where}: cannot write the export ({err.strerror or err}); {out} is left as it was") from None
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
        if not out.exists():
            for parent in created:
                with suppress(OSError):  # something else was put there meanwhile
                    parent.rmdir()


def write_diagram(model: Seq2Seq, out: Path) -> str | None:
    """The architecture diagram as ``out/diagram.svg``, or None without Graphviz (:mod:`adlnmt.diagram`)."""
    from adlnmt.diagram import model_svg

    try:
        (out / DIAGRAM).write_text(model_svg(model), encoding="utf-8")
    except UserError:
        return None
    return DIAGRAM
