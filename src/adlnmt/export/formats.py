"""``adlnmt export``'s work: write a model in a format, check it against PyTorch, write the manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from adlnmt.errors import UserError
from adlnmt.export.directory import Source, staged, write_export
from adlnmt.inference.engines import require
from adlnmt.inference.onnx_engine import OnnxEngine
from adlnmt.inference.state import probe_source
from adlnmt.store.export_dir import QUANTIZATIONS, ExportDir

TOLERANCE = 1e-3  # largest |Δ log-probability| between an fp32 export and PyTorch


@torch.no_grad()
def verify_onnx(source: Source, out: Path, details: dict[str, Any]) -> None:
    """Decode a batch of a shape the graphs were not traced with (3 sentences, 7 tokens, 5 steps) with both
    engines; a difference in log-probabilities is a UserError naming the layers suspected."""
    model = source.model.eval()
    export = ExportDir(out, {"format": "onnx", "onnx": details}, source.data)
    engine = OnnxEngine(export, threads=torch.get_num_threads())
    src = probe_source(model, 3, 7)
    memories = model.encode(src), engine.encode(src)
    states = model.init_state(memories[0]), engine.init_state(memories[1])
    for step in range(5):
        tokens = (torch.arange(3) + 4 + step) % model.config.tgt_vocab_size
        expected = torch.log_softmax(model.decode_step(tokens, memories[0], states[0]).float(), dim=-1)
        found, _ = engine.next_log_probs(tokens, memories[1], states[1], alignments=False)
        difference = float((expected - found).abs().max())
        if not difference <= TOLERANCE:
            suspects = ", ".join(details["traced_control_flow"]) or "none reported"
            raise UserError(f"the exported ONNX graphs differ from PyTorch (log-probabilities by {difference:.3g} at "
                            f"step {step}); layers with Python control flow on traced values: {suspects}")  # fmt: skip


def write_onnx(source: Source, out: Path, quantize: str) -> dict[str, Any]:
    require("onnxruntime")
    from adlnmt.export.onnx import export_onnx, quantize_graphs

    details = export_onnx(source.model, out, *source.positions)
    verify_onnx(source, out, details)
    if quantize == "int8":
        quantize_graphs(out)
    return {"onnx": details}


def write_ctranslate2(source: Source, out: Path, quantize: str) -> dict[str, Any]:
    require("ctranslate2")
    from adlnmt.export.ctranslate2_spec import export_ctranslate2

    return {"ctranslate2": export_ctranslate2(source, out, quantize)}


WRITERS = {"onnx": write_onnx, "ctranslate2": write_ctranslate2}


def export_model(source: Source, out: Path, export_format: str, quantize: str = "none") -> ExportDir:
    """Write ``source`` to the export directory ``out`` in ``export_format`` (onnx | ctranslate2), atomically
    (:func:`~adlnmt.export.directory.staged`)."""
    if export_format not in WRITERS:
        raise UserError(f"unknown export format '{export_format}'; choose one of {', '.join(WRITERS)}")
    if quantize not in QUANTIZATIONS:
        raise UserError(f"unknown quantization '{quantize}'; choose one of {', '.join(QUANTIZATIONS)}")
    with staged(out, source.model_dir) as temporary:
        details = WRITERS[export_format](source, temporary, quantize)
        write_export(source, temporary, export_format, {"quantize": quantize, **details})
    return ExportDir.load(out)
