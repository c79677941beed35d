"""Shared by the fault tests and ``sweep.py``: the tiny training run as a subprocess (optionally with a fault hook),
and the comparison of a run's outcome with an uninterrupted run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors.torch import load_file

from train.conftest import TINY_MODEL

SRC = Path(__file__).resolve().parents[2] / "src"
OPTIONS = [*TINY_MODEL, "--checkpoint-interval", "10", "--keep-last", "2", "--no-valid-bleu", "--lr", "1e-3"]
# wall-clock figures: never equal between runs
TIMING = {"tokens_per_s", "train_minutes", "train_seconds", "window_seconds"}


def environment(hook: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    env.pop("ADLNMT_FAULT_HOOK", None)
    return {**env, "ADLNMT_FAULT_HOOK": hook} if hook else env


def train_argv(data: Path, model: Path, updates: int) -> list[str]:
    return ["train", "--data", str(data), "--model", str(model), "--max-updates", str(updates), *OPTIONS]


def start(data: Path, model: Path, updates: int, hook: str | None = None) -> subprocess.Popen:
    """``adlnmt train`` in a subprocess (stderr piped)."""
    command = [sys.executable, "-m", "adlnmt", *train_argv(data, model, updates)]
    return subprocess.Popen(command, env=environment(hook), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def run(data: Path, model: Path, updates: int, hook: str | None = None) -> tuple[int, str]:
    """Run ``adlnmt train`` to the end: (exit status, stderr)."""
    process = start(data, model, updates, hook)
    _, stderr = process.communicate(timeout=300)
    return process.returncode, stderr


def records(model: Path) -> list[dict[str, Any]]:
    path = model / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def outcome(model: Path, updates: int) -> dict[str, Any]:
    """What must not depend on interruptions: the final training state (parameters, optimizer, schedule, counters,
    RNG), metrics.jsonl and best.safetensors without wall-clock figures, and the names of the kept files."""
    state = torch.load(model / "states" / f"update-{updates:07d}.state.pt", weights_only=True)
    return {
        "state": drop_timing(state),
        "metrics": [drop_timing(r) for r in records(model)],
        "best": load_file(model / "best.safetensors"),
        "files": sorted(p.name for folder in ("checkpoints", "states") for p in (model / folder).iterdir()),
    }


def drop_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_timing(v) for k, v in value.items() if k not in TIMING}
    return value


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where two outcomes differ (tensors compared exactly); empty when they are identical."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return [] if a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b) else [where]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where} keys {sorted(map(str, a.keys() ^ b.keys()))}"]
        return [d for key in a for d in differences(a[key], b[key], f"{where}.{key}")]
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


TINY_ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
TINY_DECODER = "pos -> repeat(1, res_nd({x}) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"  # x: self-attention


def write_tiny_grid(path: Path, name: str, demo: Path, variants: dict[str, str], beam: int, updates: int,
                    interval: int) -> Path:  # fmt: skip
    """An experiment grid of tiny models on the demo corpus (``demo``/corpus, ``demo``/data), seeds 1 and 2: one
    variant per entry of ``variants`` (name → the decoder's self-attention layer)."""
    corpus = demo / "corpus"
    grid = {
        "name": name,
        "data": str(demo / "data"),
        "test": [{"name": "test", "src": str(corpus / "test.src"), "ref": str(corpus / "test.tgt")}],
        "metrics": ["bleu"],
        "seeds": [1, 2],
        "translate": {"beam": beam},
        "train": {"d_model": 32, "heads": 4, "batch_tokens": 600, "max_updates": updates,
                  "checkpoint_interval": interval, "valid_bleu": False, "lr": 2e-3},
        "variants": [{"name": variant, "encoder": TINY_ENCODER, "decoder": TINY_DECODER.format(x=layer)}
                     for variant, layer in variants.items()],
    }  # fmt: skip
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path
