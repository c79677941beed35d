"""Load a trained model directory and translate raw text (greedy until beam search lands)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from adlnmt.data.dataset import DataDir
from adlnmt.errors import UserError
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.search import greedy
from adlnmt.train.checkpoint import load_weights


def resolve_checkpoint(model_dir: Path, checkpoint: str) -> Path:
    if checkpoint == "best":
        return model_dir / "best.safetensors"
    if checkpoint == "last":
        files = sorted((model_dir / "checkpoints").glob("update-*.safetensors"))
        if not files:
            raise UserError(f"{model_dir}: no checkpoints yet")
        return files[-1]
    return Path(checkpoint)


class Translator:
    """``Translator.load("model_dir").translate(["Ein Hund läuft."])`` → detokenised strings."""

    def __init__(self, model: Seq2Seq, data: DataDir, max_input_len: int, device: str = "cpu") -> None:
        self.model = model.eval()
        self.data = data
        self.max_input_len = max_input_len
        self.device = device

    @classmethod
    def load(cls, model_dir: str | Path, checkpoint: str = "best", device: str = "cpu") -> Translator:
        model_dir = Path(model_dir)
        config_path = model_dir / "config.json"
        if not config_path.is_file():
            raise UserError(f"{model_dir}: not a model directory (no config.json)")
        stored = json.loads(config_path.read_text(encoding="utf-8"))
        model = Seq2Seq(ModelConfig(**stored["model"]))
        load_weights(model, resolve_checkpoint(model_dir, checkpoint))
        data = DataDir.load(stored["train"]["data"])
        max_len = int(data.manifest.get("options", {}).get("max_len", 250))
        return cls(model.to(device), data, max_len, device)

    def encode(self, line: str, number: int) -> list[int]:
        pieces = len(self.data.src_vocab.encode(line))
        if pieces > self.max_input_len:
            print(f"warning: input line {number}: {pieces} pieces truncated to {self.max_input_len}", file=sys.stderr)
        return self.data.encode_source(line, self.max_input_len)

    def translate(self, lines: Sequence[str], batch_size: int = 64) -> list[str]:
        """One output per input line, in order; an empty line gives an empty line."""
        rows = [i for i, line in enumerate(lines) if line.strip()]
        outputs = [""] * len(lines)
        with torch.inference_mode():
            sources = [self.encode(lines[i], i + 1) for i in rows]
            hyps = greedy(self.model, sources, batch_size, device=self.device)
        for row, hyp in zip(rows, hyps, strict=True):
            outputs[row] = self.data.tgt_vocab.decode(hyp)
        return outputs
