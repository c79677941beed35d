"""Validation at a checkpoint: perplexity of the validation set (cross-entropy without label smoothing) and
greedy BLEU (sacreBLEU on detokenised text); with several corpora, also per corpus (``valid_ppl.NAME``,
``valid_bleu.NAME``)."""

from __future__ import annotations

import math

import numpy as np
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
    """``valid_ppl`` and, with ``bleu``, ``valid_bleu`` of ``model`` on the validation split of ``data`` (and per
    corpus, when the data has validation sets of several); the model is left in training mode."""
    split = data.split("valid")
    ranges = {name: range(*c["valid"]) for name, c in data.corpora().items() if c.get("valid")}
    parts = {"": range(len(split)), **({f".{name}": r for name, r in ranges.items()} if len(ranges) > 1 else {})}
    model.eval()
    nll, tokens = np.zeros(len(split)), np.zeros(len(split))  # per sentence
    for indices in make_batches(split, batch_tokens, 0, 0, shuffle=False):
        batch = collate(split, indices).to(device)
        logits = model(batch.src, batch.tgt_in).float()  # [B, T, V]
        losses = F.cross_entropy(logits.transpose(1, 2), batch.tgt_out, ignore_index=PAD, reduction="none")  # [B, T]
        nll[indices] = losses.sum(1).cpu().numpy()
        tokens[indices] = batch.tgt_lengths.cpu().numpy()
    metrics = {f"valid_ppl{key}": math.exp(min(nll[r].sum() / max(tokens[r].sum(), 1), 100.0))
               for key, r in parts.items()}  # fmt: skip
    if bleu:
        sources = [split.src(i).tolist() for i in range(len(split))]
        hypotheses = [data.tgt_vocab.decode(h) for h in greedy(model, sources, device=device)]
        references = data.valid_references()
        for key, r in parts.items():
            metrics[f"valid_bleu{key}"] = sacrebleu.corpus_bleu(hypotheses[r.start : r.stop],
                                                                [references[r.start : r.stop]]).score  # fmt: skip
    model.train()
    return metrics
