"""The ONNX Runtime engine: a :class:`~adlnmt.inference.stepper.StepEngine` (``encode`` / ``init_state`` /
``next_log_probs``) on the encoder, init and step graphs of an ONNX export. The search's one batched greedy/beam
algorithm drives the sessions, and the decoder state stays a :class:`~adlnmt.layers.base.DecoderState` of torch tensors
(shared with numpy, no copies), so beam reorders and dropped sentences are the same gathers as with PyTorch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from adlnmt.errors import UserError
from adlnmt.inference.constraints import EncodedConstraints
from adlnmt.inference.engine import CAPABILITIES
from adlnmt.inference.options import Hypothesis, SearchOptions
from adlnmt.inference.search import translate_ids
from adlnmt.inference.state import StateLayout, path_owners
from adlnmt.inference.stepper import StepEngine
from adlnmt.layers.base import DecoderState, SourceMemory
from adlnmt.store import ExportDir


class OnnxEngine(StepEngine):
    """The search's engine on the encoder, init and step graphs of an ONNX export."""

    name = "onnxruntime"
    capabilities = CAPABILITIES[name]

    def __init__(self, export: ExportDir, threads: int, workers: int = 1) -> None:
        """``threads``: ONNX Runtime's intra-op threads; with ``workers`` > 1 (``--workers``: the search's forked
        single-thread processes) one, so that the sessions own no thread pool a fork would leave behind."""
        import onnxruntime as ort

        section = export.manifest["onnx"]
        self.layout = StateLayout.from_dict(section["state"])
        self.owners = path_owners(self.layout)
        self.memory_names: list[str] = section["io"]["encoder"]["outputs"]
        self.state_names: list[str] = section["io"]["step"]["inputs"][2 + len(self.memory_names) :]
        self.max_positions = export.max_target_positions
        self.max_output_len = self.max_positions - 1  # the search stops within the exported positions
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1 if workers > 1 else max(1, threads)
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

    def translate_ids(
        self,
        sources: Sequence[Sequence[int]],
        options: SearchOptions,
        prefixes: Sequence[Sequence[int]] | None = None,
        constraints: Sequence[EncodedConstraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        return translate_ids(self, sources, options, prefixes=prefixes, constraints=constraints)
