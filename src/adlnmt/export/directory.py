"""An export directory: graphs or a converted model beside everything needed to translate without the
training files — the vocabulary (sentencepiece models and the data manifest, in ``vocab/``), the model's ADL
and options, the search defaults — described by ``export.json``."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adlnmt.errors import UserError
from adlnmt.search_options import DEFAULT_OPTIONS

if TYPE_CHECKING:  # numpy and PyTorch: not needed to parse `adlnmt export`'s arguments
    from adlnmt.data.dataset import DataDir
    from adlnmt.model import Seq2Seq

EXPORT_MANIFEST = "export.json"
DIAGRAM = "diagram.svg"  # the architecture, drawn at export time for `adlnmt serve` without PyTorch
FORMAT_VERSION = 1
FORMATS = ("onnx", "ctranslate2")
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
        path = Path(path)
        manifest_path = path / EXPORT_MANIFEST
        if not manifest_path.is_file():
            raise UserError(f"{path}: not an export directory (no {EXPORT_MANIFEST}; run `adlnmt export`)")
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("format_version") != FORMAT_VERSION or manifest.get("format") not in FORMATS:
            raise UserError(f"{manifest_path}: unsupported export (format {manifest.get('format')!r}, "
                            f"version {manifest.get('format_version')!r})")  # fmt: skip
        from adlnmt.data.dataset import DataDir

        return cls(path, manifest, DataDir.load(path / "vocab"))


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
    (out / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def write_diagram(model: Seq2Seq, out: Path) -> str | None:
    """The architecture diagram as ``out/diagram.svg``, or None without Graphviz (:mod:`adlnmt.diagram`)."""
    from adlnmt.diagram import model_svg

    try:
        (out / DIAGRAM).write_text(model_svg(model), encoding="utf-8")
    except UserError:
        return None
    return DIAGRAM
