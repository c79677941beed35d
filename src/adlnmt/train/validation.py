"""Validation at a checkpoint: perplexity of the validation set (cross-entropy without label smoothing) and
greedy BLEU (sacreBLEU on detokenised text)."""

from __future__ import annotations

import math

import sacrebleu
import torch
import torch.nn.functional as F

from adlnmt.data.data_dir import DataDir
from adlnmt.data.dataset import collate, make_batches
from adlnmt.data.vocab import PAD
from adlnmt.inference.search import greedy
from adlnmt.model import Seq2Seq


@torch.inference_mode()
def validate(model: Seq2Seq, data: DataDir, batch_tokens: int, bleu: bool, device: torch.device) -> dict[str, float]:
    """``valid_ppl`` and, with ``bleu``, ``valid_bleu`` of ``model`` on the validation split of ``data``; the model is
    left in training mode."""
    split = data.split("valid")
    model.eval()
    nll, tokens = 0.0, 0
    for indices in make_batches(split, batch_tokens, 0, 0, shuffle=False):
        batch = collate(split, indices).to(device)
        logits = model(batch.src, batch.tgt_in).float()  # [B, T, V]
        nll += F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD, reduction="sum").item()
        tokens += batch.tgt_tokens
    metrics = {"valid_ppl": math.exp(min(nll / max(tokens, 1), 100.0))}
    if bleu:
        sources = [split.src(i).tolist() for i in range(len(split))]
        hypotheses = [data.tgt_vocab.decode(h) for h in greedy(model, sources, device=device)]
        metrics["valid_bleu"] = sacrebleu.corpus_bleu(hypotheses, [data.valid_references()]).score
    model.train()
    return metrics
