"""Which engine runs a model directory or an export (``--engine``, read from the engines' capabilities,
:mod:`adlnmt.inference.engine`), and loading an export's engine. This module imports neither PyTorch nor an
engine's package until an engine is loaded.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from adlnmt.errors import UserError
from adlnmt.inference.engine import CAPABILITIES, ENGINE_CHOICES, ENGINES, FEATURES, Engine
from adlnmt.inference.options import DEFAULT_OPTIONS, SearchOptions
from adlnmt.store import ExportDir

if TYPE_CHECKING:
    from adlnmt.model import Seq2Seq


def require(engine: str) -> None:
    """UserError naming the extra to install when ``engine``'s package is missing."""
    capabilities = CAPABILITIES[engine]
    package = capabilities.package
    if package is not None and importlib.util.find_spec(package) is None:
        raise UserError(f"engine {engine} needs the {package} package: pip install 'adlnmt[{capabilities.extra}]'")


def installed(engine: str) -> bool:
    package = CAPABILITIES[engine].package
    return package is None or importlib.util.find_spec(package) is not None


def engine_threads(threads: int = 0) -> int:
    """``threads`` when positive, else PyTorch's intra-op thread count where PyTorch is loaded (so that
    ``torch.set_num_threads`` applies), else the CPUs this process may run on."""
    if threads > 0:
        return threads
    if "torch" in sys.modules:
        return int(sys.modules["torch"].get_num_threads())
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load_engine(export: ExportDir, threads: int, workers: int = 1) -> Engine:
    """The engine that runs ``export`` (by its format; for ``workers`` > 1, the searches' ``--workers``); a
    UserError naming the extra when its package is missing, and one naming the export when a manifest section or a
    file cannot be read (the engines' own messages hold source paths and internals)."""
    require(engine_for(export))
    try:
        if export.format == "onnx":
            from adlnmt.inference.onnx_engine import OnnxEngine

            return OnnxEngine(export, threads, workers)
        from adlnmt.inference.ctranslate2_engine import CTranslate2Engine

        return CTranslate2Engine(export, threads, workers=workers)
    except UserError:
        raise
    except Exception as err:  # onnxruntime's and ctranslate2's load errors have no common base
        raise UserError(f"{export.path}: the {export.format} export cannot be loaded ({type(err).__name__}); "
                        "export the model again") from None  # fmt: skip


def engine_for(export: ExportDir) -> str:
    """The engine that runs ``export``."""
    return check_export_engine("auto", export.path, export.format)


def check_export_engine(requested: str, path: Path, export_format: str) -> str:
    """The engine that runs the ``export_format`` export in ``path``; a UserError naming it unless ``requested``
    (``--engine``) is that engine or auto."""
    wanted = next(name for name in ENGINES if CAPABILITIES[name].export_format == export_format)
    if requested not in ("auto", wanted):
        article = "an" if export_format[0] in "aeiou" else "a"
        raise UserError(f"{path} is {article} {export_format} export, run by --engine {wanted}, not {requested}")
    return wanted


def check_model_dir_engine(requested: str, model_dir: Path) -> None:
    """``--engine requested`` for the model directory ``model_dir``: torch and auto run it on torch (the only engine
    that runs model directories); an export engine is a UserError naming the export to run first."""
    if requested not in ENGINE_CHOICES:
        raise UserError(f"unknown engine '{requested}'; choose one of {', '.join(ENGINE_CHOICES)}")
    export_format = CAPABILITIES["torch" if requested == "auto" else requested].export_format
    if export_format is not None:
        raise UserError(f"{model_dir} is a model directory; the {requested} engine runs an export of it: run "
                        f"`adlnmt export --model {model_dir} --format {export_format} --out DIR`, then translate "
                        "with --model DIR")  # fmt: skip


def auto_note(
    model: Seq2Seq,
    model_dir: Path,
    precision: str = "fp32",
    device: str = "cpu",
    options: SearchOptions = DEFAULT_OPTIONS,
) -> str:
    """Why ``--engine auto`` runs the model directory ``model_dir`` on torch, for stderr: the only engine that runs
    a model directory. For a Transformer on the CPU in fp32 or int8 with nothing CTranslate2 lacks, the ``adlnmt
    export`` command that makes it run on CTranslate2, the fastest measured there (int8 with ``--workers``:
    benchmarks/NOTES.md, "CTranslate2's two threads"); otherwise what keeps it on torch (a feature, a device, a
    precision or a layer CTranslate2 lacks)."""
    from adlnmt.inference.ctranslate2_shape import unsupported_layer

    lacking = [FEATURES[feature][0] for feature in CAPABILITIES["ctranslate2"].missing(options)]
    if lacking or device.split(":")[0] not in CAPABILITIES["ctranslate2"].devices:
        return f"only the torch engine gives {', '.join(lacking or [device])}"
    if precision not in CAPABILITIES["ctranslate2"].precisions:
        return f"the fastest measured in {precision}"
    refused = unsupported_layer(model)
    if refused is not None:
        return refused
    install = "" if installed("ctranslate2") else "pip install 'adlnmt[ct2]', "
    quantize = " --quantize int8" if precision == "int8" else ""
    how = f"{install}`adlnmt export --model {model_dir} --format ctranslate2{quantize} --out DIR`, then --model DIR"
    return f"it runs model directories; the faster ctranslate2 engine runs an export of this one: {how}"
