"""Export a model to ONNX: an encoder graph, a state-init graph and a decoder-step graph.

Exporter: ``torch.onnx.export(dynamo=False)``, the TorchScript tracer (opset 17). It traces the model's own
``encode`` / ``init_state`` / ``decode_step`` (one code path with PyTorch decoding), records shape arithmetic
and tensor-indexed slices dynamically, and every layer's Python control flow depends only on configuration;
each export is then checked against PyTorch on an untraced shape. (The dynamo exporter was not tried.)

- ``encoder.onnx``: src [batch, source] → memory_final, memory_mask, memory_block{i} (the per-block outputs
  source attentions with ``source=increasing|decreasing`` read).
- ``init.onnx``: the memory → the static entries (projected source keys/values) and the initial dynamic
  entries (zero RNN states, sums, windows) of the decoder state.
- ``step.onnx``: tokens [batch], offset (int64 scalar: the step), the memory and every state entry → log_probs
  [batch, vocab] (log-softmax of the logits), alignment [batch, source] (source attention averaged over
  layers and heads) and ``next.<entry>`` for every dynamic and growing entry (growing ones one position longer).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from adlnmt.errors import UserError
from adlnmt.export.faults import layer_in_traceback, traced_layers
from adlnmt.inference.state import StateEntry, StateLayout, module_owners, probe_memory, probe_source, probe_state
from adlnmt.inference.stepper import alignment_of
from adlnmt.layers.base import DecoderState, SourceMemory
from adlnmt.model import Seq2Seq, iter_layers

OPSET = 17
GRAPHS = {"encoder": "encoder.onnx", "init": "init.onnx", "step": "step.onnx"}
EXPORTER = f"torch.onnx.export (TorchScript tracer, dynamo=False), opset {OPSET}"


def memory_names(blocks: int) -> list[str]:
    return ["memory_final", "memory_mask", *(f"memory_block{i}" for i in range(blocks))]


def state_name(entry: StateEntry) -> str:
    return f"state.{entry.name}"


def next_name(entry: StateEntry) -> str:
    return f"next.{entry.name}"


class EncoderGraph(nn.Module):
    def __init__(self, model: Seq2Seq) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor) -> tuple[Tensor, ...]:
        memory = self.model.encode(src)
        return (memory.final, memory.mask, *memory.blocks)


class InitGraph(nn.Module):
    def __init__(self, model: Seq2Seq, layout: StateLayout) -> None:
        super().__init__()
        self.model = model
        self.layout = layout

    def forward(self, final: Tensor, mask: Tensor, *blocks: Tensor) -> tuple[Tensor, ...]:
        state = self.model.init_state(SourceMemory(final, mask, list(blocks)))
        initial = self.layout.of_kind("static", "dynamic")
        return tuple(self.layout.tensors(state, initial, module_owners(self.model)))


class StepGraph(nn.Module):
    def __init__(self, model: Seq2Seq, layout: StateLayout, blocks: int) -> None:
        super().__init__()
        self.model = model
        self.layout = layout
        self.blocks = blocks

    def forward(self, tokens: Tensor, offset: Tensor, final: Tensor, mask: Tensor, *rest: Tensor) -> tuple[Tensor, ...]:
        owners = module_owners(self.model)
        memory = SourceMemory(final, mask, list(rest[: self.blocks]))
        state = DecoderState(tokens.size(0))
        self.layout.fill(state, self.layout.entries, rest[self.blocks :], owners)
        state.step = offset  # type: ignore[assignment]  # a traced scalar: positions follow the input
        attention: list[Tensor] = []
        logits = self.model.decode_step(tokens, memory, state, attention)
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        changing = self.layout.of_kind("dynamic", "growing")
        return (log_probs, alignment_of(attention), *self.layout.tensors(state, changing, owners))


def names(layout: StateLayout, blocks: int) -> dict[str, dict[str, list[str]]]:
    """The input and output names of every graph."""
    memory = memory_names(blocks)
    return {
        "encoder": {"inputs": ["src"], "outputs": memory},
        "init": {"inputs": memory, "outputs": [state_name(e) for e in layout.of_kind("static", "dynamic")]},
        "step": {
            "inputs": ["tokens", "offset", *memory, *(state_name(e) for e in layout.entries)],
            "outputs": ["log_probs", "alignment", *(next_name(e) for e in layout.of_kind("dynamic", "growing"))],
        },
    }


def dynamic_axes(layout: StateLayout, blocks: int) -> dict[str, dict[int, str]]:
    """Every input and output name → its dynamic axes (shared by the three graphs)."""
    axes: dict[str, dict[int, str]] = {"src": {0: "batch", 1: "source"}, "tokens": {0: "batch"}}
    axes.update({name: {0: "batch", 1: "source"} for name in memory_names(blocks)})
    axes.update({"log_probs": {0: "batch"}, "alignment": {0: "batch", 1: "source"}})
    for entry in layout.entries:
        axes[state_name(entry)] = dict(entry.axes)
        axes[next_name(entry)] = {a: "time_next" if n == "time" else n for a, n in entry.axes.items()}
    return axes


def export_graph(module: nn.Module, args: tuple[Tensor, ...], path: Path, io: dict[str, list[str]],
                 axes: dict[str, dict[int, str]]) -> list[str]:  # fmt: skip
    """Trace ``module`` on ``args`` into ``path``; returns the layers whose Python control flow read traced
    values (their graph may hold constants that the verification then catches). An exception raised inside a
    layer becomes a UserError naming it."""
    used = {name: axes[name] for name in [*io["inputs"], *io["outputs"]] if name in axes}
    with traced_layers() as suspicious:
        try:
            torch.onnx.export(module, args, str(path), input_names=io["inputs"], output_names=io["outputs"],
                              dynamic_axes=used, opset_version=OPSET, dynamo=False)  # fmt: skip
        except Exception as err:
            layer = layer_in_traceback(err.__traceback__)
            if layer is None:
                raise
            raise UserError(f"layer {layer} cannot be exported to ONNX: {type(err).__name__}: {err}") from err
    return suspicious


def warm_positions(model: Seq2Seq, source_positions: int, target_positions: int) -> None:
    """Run the encoder on a ``source_positions``-long source and a decoder step at position ``target_positions`` − 1,
    so that every layer's lazily grown tables (sinusoids) cover them when traced as constants."""
    memory = probe_memory(model, 1, source_positions)
    state = model.init_state(memory)
    state.step = target_positions - 1
    model.decode_step(torch.full((1,), 4 % model.config.tgt_vocab_size, dtype=torch.long), memory, state)


@contextmanager
def exporting(model: Seq2Seq) -> Iterator[None]:
    """Eval mode and no autograd while tracing; the tracer's own warnings stay quiet."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        model.train(was_training)


def example_inputs(model: Seq2Seq, layout: StateLayout) -> dict[str, tuple[Tensor, ...]]:
    """Tracing inputs of the three graphs: a padded batch of 2 sentences of 5 tokens, 2 steps decoded."""
    memory = probe_memory(model, 2, 5)
    state = probe_state(model, memory, 2)
    owners = module_owners(model)
    tokens = torch.full((2,), 4 % model.config.tgt_vocab_size, dtype=torch.long)
    mem = (memory.final, memory.mask, *memory.blocks)
    step = (tokens, torch.tensor([state.step]), *mem, *layout.tensors(state, layout.entries, owners))
    return {"encoder": (probe_source(model, 2, 5),), "init": mem, "step": step}


def export_onnx(model: Seq2Seq, out: Path, max_positions: int, max_target_positions: int) -> dict[str, Any]:
    """Write the three graphs of ``model`` (fp32), covering ``max_positions`` source and ``max_target_positions``
    target positions, to ``out``; returns the manifest's ``onnx`` section."""
    out.mkdir(parents=True, exist_ok=True)
    with exporting(model):
        layout = StateLayout.discover(model)
        blocks = len(model.encode(probe_source(model, 1, 3)).blocks)
        warm_positions(model, max_positions, max_target_positions)
        io, axes, args = names(layout, blocks), dynamic_axes(layout, blocks), example_inputs(model, layout)
        graphs = {"encoder": EncoderGraph(model), "init": InitGraph(model, layout),
                  "step": StepGraph(model, layout, blocks)}  # fmt: skip
        suspicious = {name: export_graph(graph, args[name], out / GRAPHS[name], io[name], axes)
                      for name, graph in graphs.items()}  # fmt: skip
    return {
        "exporter": EXPORTER,
        "graphs": GRAPHS,
        "io": io,
        "blocks": blocks,
        "max_positions": max_positions,
        "max_target_positions": max_target_positions,
        "attention_layers": sum(1 for layer in iter_layers(model.decoder) if layer.reads_source),
        "state": layout.to_dict(),
        "traced_control_flow": sorted({layer for found in suspicious.values() for layer in found}),
    }


def _not_pre_processing_advice(record: logging.LogRecord) -> bool:
    """False for ONNX Runtime's advice to pre-process a model before quantising it, which ``quantize_dynamic`` logs
    to the root logger for every graph: the graphs are adlnmt's own, so no user of ``adlnmt export`` can act on it."""
    return not str(record.msg).startswith("Please consider to run pre-processing before quantization")


def quantize_graphs(out: Path, graphs: Sequence[str] = tuple(GRAPHS.values())) -> None:
    """Dynamic int8 quantisation (onnxruntime.quantization.quantize_dynamic: int8 weights of MatMul/Gemm,
    activations quantised on the fly) of every graph, in place; ONNX Runtime's other warnings pass."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    root.addFilter(_not_pre_processing_advice)
    try:
        for name in graphs:
            path = out / name
            quantized = path.with_suffix(".int8.onnx")
            quantize_dynamic(str(path), str(quantized), weight_type=QuantType.QInt8)
            quantized.replace(path)
    finally:
        root.removeFilter(_not_pre_processing_advice)
