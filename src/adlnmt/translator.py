"""Load a trained model directory and translate raw text: the Python API behind `adlnmt translate`."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from adlnmt.data.dataset import DataDir
from adlnmt.errors import UserError
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.search import DEFAULT_OPTIONS, SearchOptions, translate_ids
from adlnmt.train.checkpoint import load_weights
from adlnmt.train.model_dir import load_vocabularies, read_stored_config


def resolve_checkpoint(model_dir: Path, checkpoint: str) -> Path:
    """best | last | averaged (written by `adlnmt average`) | a path to a .safetensors file."""
    if checkpoint in ("best", "averaged"):
        return model_dir / f"{checkpoint}.safetensors"
    if checkpoint == "last":
        files = sorted((model_dir / "checkpoints").glob("update-*.safetensors"))
        if not files:
            raise UserError(f"{model_dir}: no checkpoints yet")
        return files[-1]
    return Path(checkpoint)


PRECISIONS = ("fp32", "bf16", "fp16", "int8")


def with_precision(model: Seq2Seq, precision: str, device: str) -> Seq2Seq:
    """The model in inference ``precision`` (see :meth:`Translator.load`)."""
    on_cuda = device.startswith("cuda")
    if precision not in PRECISIONS:
        raise UserError(f"unknown precision '{precision}'; choose one of {', '.join(PRECISIONS)}")
    if (precision == "fp16" and not on_cuda) or (precision == "int8" and on_cuda):
        raise UserError(f"precision {precision} needs {'a CUDA device' if precision == 'fp16' else 'the CPU'}")
    if precision in ("bf16", "fp16"):
        return model.to(torch.bfloat16 if precision == "bf16" else torch.float16)
    if precision == "int8":
        with warnings.catch_warnings():  # deprecated in favour of torchao (not a dependency); still works
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            from torch.ao.quantization import quantize_dynamic

            return quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    return model


@dataclass
class Translation:
    """One hypothesis: detokenised text, its subword pieces, scores and (optionally) alignment."""

    text: str
    pieces: list[str]
    score: float  # log_prob / GNMT length penalty
    log_prob: float
    alignment: list[list[float]] | None = None  # [len(pieces) + 1 (EOS)][source pieces + markers + EOS]

    def to_dict(self) -> dict:
        record = {"translation": self.text, "score": self.score, "log_prob": self.log_prob, "pieces": self.pieces}
        if self.alignment is not None:
            record["alignment"] = self.alignment
        return record


class Translator:
    """``Translator.load("model_dir").translate(["Ein Hund läuft."], SearchOptions(beam=5))`` → detokenised
    strings."""

    def __init__(
        self, model: Seq2Seq, data: DataDir, max_input_len: int, device: str = "cpu", model_dir: Path | None = None
    ) -> None:
        self.model = model.eval()
        self.model_dir = model_dir
        self.data = data
        self.max_input_len = max_input_len
        self.device = device

    @classmethod
    def load(
        cls, model_dir: str | Path, checkpoint: str = "best", device: str = "cpu", precision: str = "fp32"
    ) -> Translator:
        """``precision``: fp32; bf16 or fp16 weights and activations (fp16: CUDA only); int8: dynamic
        int8 quantisation of every linear layer (CPU only; activations stay fp32)."""
        model_dir = Path(model_dir)
        stored = read_stored_config(model_dir)
        model = Seq2Seq(ModelConfig(**stored["model"]))
        load_weights(model, resolve_checkpoint(model_dir, checkpoint))
        data = load_vocabularies(model_dir, stored)
        max_len = int(data.manifest.get("options", {}).get("max_len", 250))
        return cls(with_precision(model.to(device), precision, device), data, max_len, device, model_dir)

    def encode(self, line: str, number: int) -> list[int]:
        pieces = len(self.data.src_vocab.encode(line))
        if pieces > self.max_input_len:
            print(f"warning: input line {number}: {pieces} pieces truncated to {self.max_input_len}", file=sys.stderr)
        return self.data.encode_source(line, self.max_input_len)

    def search(self, lines: Sequence[str], options: SearchOptions = DEFAULT_OPTIONS) -> list[list[Translation]]:
        """``options.nbest`` translations per input line, best first, in input order; an empty line gets none."""
        rows = [i for i, line in enumerate(lines) if line.strip()]
        sources = [self.encode(lines[i], i + 1) for i in rows]
        found = translate_ids(self.model, sources, options, self.device)
        results: list[list[Translation]] = [[] for _ in lines]
        vocab = self.data.tgt_vocab
        for row, hyps in zip(rows, found, strict=True):
            results[row] = [
                Translation(
                    vocab.decode(h.tokens),
                    [vocab.piece(t) for t in h.tokens],
                    h.score,
                    h.log_prob,
                    None if h.alignment is None else h.alignment.tolist(),
                )
                for h in hyps
            ]
        return results

    def translate(self, lines: Sequence[str], options: SearchOptions = DEFAULT_OPTIONS) -> list[str]:
        """One detokenised translation per input line, in order; an empty line gives an empty line."""
        found = self.search(lines, options)
        return [hyps[0].text if hyps else "" for hyps in found]
