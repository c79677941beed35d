"""Reading an export directory (``adlnmt export``): graphs or a converted model beside everything needed to
translate without the training files — the vocabulary (``vocab/``), the model's ADL and options, the search
defaults — described by ``export.json``, which also keeps the SHA-256 of every other file. Loading checks
``export.json`` and every file against its hash: a damaged export is an error naming the file. The writing side is
:mod:`adlnmt.export.directory`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from adlnmt.errors import UserError
from adlnmt.jsontext import JsonError, parse_json
from adlnmt.store.atomic import file_sha256
from adlnmt.store.names import DIAGRAM, EXPORT_MANIFEST, VOCAB_DIR

if TYPE_CHECKING:  # numpy and sentencepiece: not needed to tell an export directory
    from adlnmt.data.data_dir import DataDir

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

    @property
    def max_target_positions(self) -> int:
        """The target positions the format's graphs or tables cover (the output stops within them): its
        ``max_target_positions``, or ``max_positions`` in an export written when one count bounded both sides."""
        section = self.manifest[self.format]
        return int(section.get("max_target_positions", section["max_positions"]))

    @classmethod
    def load(cls, path: str | Path) -> ExportDir:
        """The export in ``path``, its manifest and files checked; UserError naming the first damaged file."""
        path = Path(path)
        manifest_path = path / EXPORT_MANIFEST
        if not manifest_path.is_file():
            raise UserError(f"{path}: not an export directory (no {EXPORT_MANIFEST}; run `adlnmt export`)")
        manifest = read_manifest(manifest_path)
        check_files(path, manifest.get(FILE_HASHES), manifest_path)
        from adlnmt.data.data_dir import DataDir

        return cls(path, manifest, DataDir.load(path / VOCAB_DIR))


def read_manifest(manifest_path: Path) -> dict[str, Any]:
    """``export.json`` with the entries a loader reads checked; UserError naming it when damaged or malformed."""
    try:
        manifest = parse_json(manifest_path.read_bytes())
    except JsonError as err:
        raise UserError(f"{manifest_path}: damaged (invalid JSON: {err}); export the model again") from None
    except OSError as err:
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
        if file_sha256(path) != expected:
            raise UserError(f"{path}: damaged (its content differs from what {manifest_path} records); "
                            "export the model again")  # fmt: skip


def recorded_diagram(path: Path, manifest: dict[str, Any]) -> str | None:
    """The architecture diagram (SVG text) the export in ``path`` drew when it was written, None for an export made
    without Graphviz."""
    return (path / DIAGRAM).read_text(encoding="utf-8") if manifest.get("diagram") else None


def is_export_dir(path: str | Path) -> bool:
    return (Path(path) / EXPORT_MANIFEST).is_file()
