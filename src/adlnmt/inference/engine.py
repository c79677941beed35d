"""The engine base class and what each engine can do: a :class:`Capabilities` record per engine, declared once in
:data:`CAPABILITIES`, and the names ``--engine`` takes. Without PyTorch.

Engines: ``torch`` (:class:`~adlnmt.inference.search.TorchEngine`, the PyTorch search on a model directory),
``ensemble`` (:class:`~adlnmt.inference.ensemble.Ensemble`, several models searched as one), ``onnxruntime``
(:class:`~adlnmt.inference.onnx_engine.OnnxEngine`, ONNX Runtime sessions driven by the PyTorch search) and
``ctranslate2`` (:class:`~adlnmt.inference.ctranslate2_engine.CTranslate2Engine`, which hands whole batches to
``ctranslate2.Translator``). The export engines run an export directory (``adlnmt export``), never a model
directory. ``--engine auto`` (:mod:`adlnmt.inference.engines`), ``adlnmt translate``, ``adlnmt serve``, forced
scoring and the search read the records.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from adlnmt.errors import UserError
from adlnmt.inference.constraints import EncodedConstraints
from adlnmt.inference.options import Hypothesis, SearchOptions

PRECISIONS = ("fp32", "bf16", "fp16", "int8")


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do: the search options it honours, what it runs in and on, what it needs."""

    alignments: bool
    """Source-attention alignments (``--alignments``)."""
    sampling: bool
    """Top-k / top-p sampling (``--sampling``)."""
    prefix: bool
    """Target prefixes that start the translations (``--prefix``)."""
    uncached: bool
    """The re-fed search, the whole prefix through the decoder every step (``--uncached``)."""
    workers: bool
    """Batches searched in parallel by single-thread workers (``--workers``: forked processes; CTranslate2's
    replicas)."""
    cuda_graphs: bool
    """Decoder steps replayed from CUDA graphs (``--cuda-graphs``)."""
    shortlist: bool
    """A lexical shortlist restricting the output vocabulary (``--shortlist``; CTranslate2: its vocabulary map)."""
    constraints: bool
    """Lexical constraints: phrases to include and to exclude (``--constraints``)."""
    scores: bool
    """Forced decoding: the log-probabilities of given translations (``adlnmt score-pairs``)."""
    precisions: tuple[str, ...]
    """``--precision`` values it runs in (an export engine: those of its export's quantization)."""
    devices: tuple[str, ...]
    """Device types it runs on."""
    export_format: str | None = None
    """The export format it runs (``adlnmt export --format``); None: it runs model directories."""
    package: str | None = None
    """The package it needs besides adlnmt's dependencies, installed by adlnmt's extra ``extra``."""
    extra: str | None = None

    def missing(self, options: SearchOptions, prefix: bool = False, constraints: bool = False) -> list[str]:
        """What ``options`` (and target prefixes, with ``prefix``; lexical constraints, with ``constraints``) ask for
        that the engine lacks: keys of :data:`FEATURES`."""
        asked = {"alignments": options.alignments, "sampling": bool(options.sampling), "prefix": prefix,
                 "uncached": not options.incremental, "workers": options.workers > 1,
                 "cuda_graphs": options.cuda_graphs, "shortlist": options.shortlist is not None,
                 "constraints": constraints}  # fmt: skip
        return [feature for feature, wanted in asked.items() if wanted and not getattr(self, feature)]


FEATURES = {  # a search feature of Capabilities → its translate flag and how a refusal names it
    "alignments": ("--alignments", "alignments need"),
    "sampling": ("--sampling", "sampling needs"),
    "prefix": ("--prefix", "a target prefix needs"),
    "uncached": ("--uncached", "the uncached (re-fed) search needs"),
    "workers": ("--workers", "worker processes need"),
    "cuda_graphs": ("--cuda-graphs", "CUDA graphs need"),
    "shortlist": ("--shortlist", "a lexical shortlist needs"),
    "constraints": ("--constraints", "lexical constraints need"),
}
EVERYTHING = {feature: True for feature in FEATURES}
CAPABILITIES = {
    "torch": Capabilities(**EVERYTHING, scores=True, precisions=PRECISIONS, devices=("cpu", "cuda")),
    "ensemble": Capabilities(
        **{**EVERYTHING, "uncached": False, "workers": False, "cuda_graphs": False, "shortlist": False},
        scores=False,
        precisions=PRECISIONS,
        devices=("cpu", "cuda"),
    ),
    "onnxruntime": Capabilities(
        alignments=True,
        sampling=True,
        prefix=False,
        uncached=False,
        workers=True,
        cuda_graphs=False,
        shortlist=False,
        constraints=False,
        scores=False,
        precisions=("fp32", "int8"),
        devices=("cpu",),
        export_format="onnx",
        package="onnxruntime",
        extra="onnx",
    ),
    "ctranslate2": Capabilities(
        alignments=False,
        sampling=False,
        prefix=False,
        uncached=False,
        workers=True,
        cuda_graphs=False,
        shortlist=True,
        constraints=False,
        scores=True,
        precisions=("fp32", "int8"),
        devices=("cpu",),
        export_format="ctranslate2",
        package="ctranslate2",
        extra="ct2",
    ),
}
ENGINES = ("torch", "onnxruntime", "ctranslate2")  # what --engine names (an ensemble is asked for by --model)
ENGINE_CHOICES = (*ENGINES, "auto")


def able(feature: str) -> list[str]:
    """The engines (of :data:`ENGINES`) that have ``feature``."""
    return [name for name in ENGINES if getattr(CAPABILITIES[name], feature)]


class Engine(ABC):
    """Searches batches of encoded sentences: what a :class:`~adlnmt.inference.translator.Translator` runs. Each
    engine has a ``name`` and its ``capabilities`` (``CAPABILITIES[name]``)."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    max_output_len: int | None = None
    """The most tokens (EOS not counted) an output or a target prefix may have (the model's positions); None: no
    bound."""

    def check(self, options: SearchOptions, prefix: bool = False, constraints: bool = False) -> None:
        """A UserError naming what ``options`` (and target prefixes, with ``prefix``; lexical constraints, with
        ``constraints``) ask that this engine lacks."""
        missing = self.capabilities.missing(options, prefix, constraints)
        if missing:
            raise UserError("; ".join(f"{FEATURES[feature][1]} the {' or '.join(able(feature))} engine, "
                                      f"not {self.name}" for feature in missing))  # fmt: skip

    @abstractmethod
    def translate_ids(
        self,
        sources: Sequence[Sequence[int]],
        options: SearchOptions,
        prefixes: Sequence[Sequence[int]] | None = None,
        constraints: Sequence[EncodedConstraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        """``options.nbest`` hypotheses for each encoded source (ending with EOS), in input order, as
        :func:`adlnmt.inference.search.translate_ids` gives them; ``prefixes[i]`` (target ids) starts every
        hypothesis of source i; ``constraints[i]`` are its lexical constraints. A UserError for what the engine
        lacks (:meth:`check`)."""
