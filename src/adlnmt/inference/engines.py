"""Inference engines over export directories, for :class:`adlnmt.inference.translator.Translator`: which engine runs an
export or a model (``--engine``), and loading it.

:class:`~adlnmt.inference.onnx_engine.OnnxEngine` drives ONNX Runtime sessions with the PyTorch search;
:class:`~adlnmt.inference.ctranslate2_engine.CTranslate2Engine` hands whole batches to ``ctranslate2.Translator``, which
searches itself. This module imports neither PyTorch nor an engine's package until an engine is loaded.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from adlnmt.errors import UserError
from adlnmt.inference.options import Hypothesis, SearchOptions
from adlnmt.store import ExportDir

if TYPE_CHECKING:
    from adlnmt.model import Seq2Seq

ENGINES = ("torch", "onnxruntime", "ctranslate2", "auto")
ENGINE_FORMATS = {"onnxruntime": "onnx", "ctranslate2": "ctranslate2"}
ENGINE_PACKAGES = {"onnxruntime": ("onnxruntime", "onnx"), "ctranslate2": ("ctranslate2", "ct2")}


def require(engine: str) -> None:
    """UserError naming the extra to install when ``engine``'s package is missing."""
    package, extra = ENGINE_PACKAGES[engine]
    if importlib.util.find_spec(package) is None:
        raise UserError(f"engine {engine} needs the {package} package: pip install 'adlnmt[{extra}]'")


def installed(engine: str) -> bool:
    return engine == "torch" or importlib.util.find_spec(ENGINE_PACKAGES[engine][0]) is not None


class SearchEngine(Protocol):
    """An engine that searches batches of encoded sentences (what a Translator needs)."""

    name: str

    def translate_ids(self, sources: Sequence[Sequence[int]], options: SearchOptions) -> list[list[Hypothesis]]: ...


def engine_threads(threads: int = 0) -> int:
    """``threads`` when positive, else PyTorch's intra-op thread count where PyTorch is loaded (so that
    ``torch.set_num_threads`` applies), else the CPUs this process may run on."""
    if threads > 0:
        return threads
    if "torch" in sys.modules:
        return int(sys.modules["torch"].get_num_threads())
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load_engine(export: ExportDir, threads: int) -> SearchEngine:
    """The engine that runs ``export`` (by its format); a UserError naming the extra when its package is missing, and
    one naming the export when a manifest section or a file cannot be read (the engines' own messages hold source
    paths and internals)."""
    require(engine_for(export))
    try:
        if export.format == "onnx":
            from adlnmt.inference.onnx_engine import OnnxEngine

            return OnnxEngine(export, threads)
        from adlnmt.inference.ctranslate2_engine import CTranslate2Engine

        return CTranslate2Engine(export, threads)
    except UserError:
        raise
    except Exception as err:  # onnxruntime's and ctranslate2's load errors have no common base
        raise UserError(f"{export.path}: the {export.format} export cannot be loaded ({type(err).__name__}); "
                        "export the model again") from None  # fmt: skip


def engine_for(export: ExportDir) -> str:
    return next(engine for engine, fmt in ENGINE_FORMATS.items() if fmt == export.format)


def pick_engine(
    requested: str, model: Seq2Seq, precision: str = "fp32", device: str = "cpu", torch_only: Sequence[str] = ()
) -> str:
    """``requested``, or for ``auto`` the fastest engine that can run ``model`` at ``precision``, as measured on a
    quiet 2-core AMD EPYC VM (benchmarks/NOTES.md, Multi30k models), printed on stderr with the reason:
    CTranslate2 in fp32 for models its Transformer specification expresses, when installed (1.3× PyTorch greedy
    with identical output, 1.6× at beam 5); PyTorch otherwise: in int8 it was 1.6× CTranslate2's int8 greedy and
    1.1× at beam 5, and it beat ONNX Runtime on every decoder family. ``torch_only``: what the caller
    asks for that only the PyTorch engine gives (alignments, the uncached search, worker processes)."""
    from adlnmt.export.ctranslate2_spec import unsupported_layer

    if requested not in ENGINES:
        raise UserError(f"unknown engine '{requested}'; choose one of {', '.join(ENGINES)}")
    if requested != "auto":
        if requested != "torch":
            require(requested)
        return requested
    if torch_only or device != "cpu":
        picked, reason = "torch", f"only the torch engine gives {', '.join(torch_only) or device}"
    elif precision != "fp32":
        picked, reason = "torch", f"the fastest measured in {precision}"
    elif not installed("ctranslate2"):
        picked, reason = "torch", "ctranslate2 is not installed (pip install 'adlnmt[ct2]')"
    elif (refused := unsupported_layer(model)) is not None:
        picked, reason = "torch", refused
    else:
        picked, reason = "ctranslate2", "the fastest measured for Transformer models in fp32"
    print(f"engine auto: {picked} ({reason})", file=sys.stderr)
    return picked
