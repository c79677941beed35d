"""Inference engines over export directories, for :class:`adlnmt.translator.Translator`.

:class:`OnnxEngine` is an :class:`~adlnmt.stepper.Engine` (``encode`` / ``init_state`` / ``next_log_probs``):
the search's one batched greedy/beam algorithm drives ONNX Runtime sessions, and the decoder state stays a
:class:`~adlnmt.layers.base.DecoderState` of torch tensors (shared with numpy, no copies), so beam reorders and
dropped sentences are the same gathers as with PyTorch. :class:`CTranslate2Engine` hands whole batches to
``ctranslate2.Translator``, which searches itself.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from adlnmt.errors import UserError
from adlnmt.export.directory import ExportDir
from adlnmt.export.state import StateLayout, path_owners
from adlnmt.layers.base import DecoderState, SourceMemory
from adlnmt.model import Seq2Seq
from adlnmt.search import Hypothesis, SearchOptions, translate_ids

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


class OnnxEngine:
    """The search's engine on the encoder, init and step graphs of an ONNX export."""

    name = "onnxruntime"

    def __init__(self, export: ExportDir, threads: int) -> None:
        require(self.name)
        import onnxruntime as ort

        section = export.manifest["onnx"]
        self.layout = StateLayout.from_dict(section["state"])
        self.owners = path_owners(self.layout)
        self.memory_names: list[str] = section["io"]["encoder"]["outputs"]
        self.state_names: list[str] = section["io"]["step"]["inputs"][2 + len(self.memory_names) :]
        self.max_positions = int(section["max_positions"])
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        self.sessions = {
            name: ort.InferenceSession(str(export.path / file), options, providers=["CPUExecutionProvider"])
            for name, file in section["graphs"].items()
        }
        self.inputs = {name: {i.name for i in session.get_inputs()} for name, session in self.sessions.items()}

    def run(self, graph: str, feeds: dict[str, Tensor]) -> list[Tensor]:
        """Run one graph on the inputs it uses (the exporter drops unused ones)."""
        used = self.inputs[graph]
        arrays = {name: np.ascontiguousarray(value.numpy()) for name, value in feeds.items() if name in used}
        return [torch.from_numpy(np.asarray(value)) for value in self.sessions[graph].run(None, arrays)]

    def memory_feeds(self, memory: SourceMemory) -> dict[str, Tensor]:
        return dict(zip(self.memory_names, [memory.final, memory.mask, *memory.blocks], strict=True))

    def encode(self, src: Tensor) -> SourceMemory:
        final, mask, *blocks = self.run("encoder", {"src": src})
        return SourceMemory(final, mask, blocks)

    def init_state(self, memory: SourceMemory) -> DecoderState:
        batch = memory.mask.size(0)
        state = DecoderState(batch)
        self.layout.fill(state, self.layout.of_kind("static", "dynamic"), self.run("init", self.memory_feeds(memory)),
                         self.owners)  # fmt: skip
        growing = self.layout.of_kind("growing")
        self.layout.fill(state, growing, [entry.empty(batch) for entry in growing], self.owners)
        return state

    def next_log_probs(self, tokens: Tensor, memory: SourceMemory, state: DecoderState, alignments: bool
                       ) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """tokens [N] → log-probabilities [N, V] and, if asked, the alignment row [N, S]; advances ``state``."""
        if state.step >= self.max_positions:
            raise UserError(f"the exported graphs cover {self.max_positions} target positions; re-export with more")
        feeds = {"tokens": tokens, "offset": torch.tensor([state.step]), **self.memory_feeds(memory)}
        feeds.update(zip(self.state_names, self.layout.tensors(state, self.layout.entries, self.owners), strict=True))
        log_probs, alignment, *changed = self.run("step", feeds)
        self.layout.fill(state, self.layout.of_kind("dynamic", "growing"), changed, self.owners)
        state.step += 1
        return log_probs, alignment if alignments else None

    def translate_ids(self, sources: Sequence[Sequence[int]], options: SearchOptions) -> list[list[Hypothesis]]:
        return translate_ids(self, sources, options)


def load_engine(export: ExportDir, threads: int) -> SearchEngine:
    """The engine that runs ``export`` (by its format); a manifest section or a file the engine cannot read is a
    UserError naming the export (the engines' own messages hold source paths and internals)."""
    from adlnmt.export.ctranslate2 import CTranslate2Engine

    engines: dict[str, Any] = {"onnx": OnnxEngine, "ctranslate2": CTranslate2Engine}
    try:
        return engines[export.format](export, threads)
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
    from adlnmt.export.ctranslate2 import unsupported_layer

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
