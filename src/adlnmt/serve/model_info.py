"""What ``GET /model`` says about the loaded model: the canonical ADL of both sides, parameter count, vocabulary
sizes, a training summary from ``metrics.jsonl`` and the architecture diagram (SVG, :mod:`adlnmt.diagram`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from adlnmt.errors import UserError
from adlnmt.inference.translator import Translator
from adlnmt.store import ModelDir, is_export_dir
from adlnmt.store.export_dir import read_manifest, recorded_diagram
from adlnmt.store.names import EXPORT_MANIFEST


def stored_model_config(model_dir: Path) -> dict[str, Any] | None:
    """The ``model`` entry of a model directory's config.json, or of an export directory's export.json."""
    files = ModelDir(model_dir)
    if files.exists():
        return files.config()["model"]
    if is_export_dir(model_dir):
        return read_manifest(model_dir / EXPORT_MANIFEST)["model"]
    return None


def training_summary(model_dir: Path) -> dict[str, Any] | None:
    """Updates, epochs and training time of the last checkpoint record; best validation perplexity and BLEU (when
    validation BLEU was computed) with their updates. None without ``metrics.jsonl`` (e.g. an export directory)."""
    records, _ = ModelDir(model_dir).metrics()
    if not records:
        return None
    last = max(records, key=lambda record: record["update"])
    summary: dict[str, Any] = {
        "updates": last["update"],
        "epochs": last.get("epoch"),
        "train_minutes": last.get("train_minutes"),
        "checkpoints": len({record["update"] for record in records}),
    }
    for metric, better in (("valid_ppl", min), ("valid_bleu", max)):
        scored = [r for r in records if isinstance(r.get(metric), int | float) and math.isfinite(r[metric])]
        if scored:
            best = better(scored, key=lambda record, metric=metric: record[metric])
            summary[f"best_{metric}"] = best[metric]
            summary[f"best_{metric}_update"] = best["update"]
    return summary


def model_description(translator: Translator, model_dir: Path, checkpoint: str, precision: str) -> dict[str, Any]:
    """The ``GET /model`` record. The diagram needs Graphviz's ``dot``: without it ``diagram_svg`` is None and
    ``diagram_error`` says how to install it. An export directory is described by what it recorded (no PyTorch)."""
    info: dict[str, Any] = {
        "checkpoint": checkpoint,
        "engine": translator.engine_name,
        "precision": precision,
        "src_vocab": translator.data.src_vocab.size,
        "tgt_vocab": translator.data.tgt_vocab.size,
        "max_input_pieces": translator.max_input_len,
        "encoder": None,
        "decoder": None,
        "parameters": None,
        "training": training_summary(model_dir),
        "diagram_svg": None,
        "diagram_error": None,
    }
    if (recorded := export_description(model_dir)) is not None:
        return info | recorded
    config = stored_model_config(model_dir)
    if config is None:
        info["diagram_error"] = "no model configuration (config.json or export.json) to draw"
        return info
    import torch

    from adlnmt.diagram import model_svg
    from adlnmt.model import ModelConfig, Seq2Seq

    with torch.device("meta"):  # shapes and counts only, no memory
        model = Seq2Seq(ModelConfig(**config))
    info |= {"encoder": model.canonical_encoder, "decoder": model.canonical_decoder}
    info["parameters"] = model.parameter_count()
    try:
        svg = model_svg(model)
        info["diagram_svg"] = svg[svg.index("<svg") :]  # without the XML prologue: ready to inline in a page
    except UserError as err:
        info["diagram_error"] = str(err)
    return info


def export_description(export_dir: Path) -> dict[str, Any] | None:
    """Canonical ADL, parameter count and diagram as an export directory recorded them, or None for a model
    directory or an export written before exports recorded them."""
    manifest = read_manifest(export_dir / EXPORT_MANIFEST) if is_export_dir(export_dir) else {}
    if "parameters" not in manifest:
        return None
    found: dict[str, Any] = {**manifest["canonical"], "parameters": manifest["parameters"]}
    if (svg := recorded_diagram(export_dir, manifest)) is not None:
        found["diagram_svg"] = svg[svg.index("<svg") :]
    else:
        found["diagram_error"] = f"{export_dir}: exported without Graphviz's dot, so without a diagram (re-export)"
    return found
