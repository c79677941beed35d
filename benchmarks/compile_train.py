"""Does torch.compile speed up the training step on this CPU? The trainer's own update (``adlnmt bench train``'s
``Updater``) on random sentence pairs in 4,000-token batches, eager against ``torch.compile(model, dynamic=True)``.

    python benchmarks/compile_train.py --threads 2            # both, one after the other
    python benchmarks/compile_train.py --modes eager           # one

Run it on a quiet machine; figures in NOTES.md ("Training step under torch.compile").
"""

from __future__ import annotations

import argparse
import time

import torch

from adlnmt.bench.train import Updater, prepared_batches, random_pairs
from adlnmt.model import Seq2Seq
from adlnmt.train.config import TrainConfig

VOCAB, BATCH_TOKENS = 8000, 4096


def measure(mode: str, warmup: int, updates: int) -> None:
    config = TrainConfig(preset="transformer-small", d_model=256, heads=4, d_ff=1024, batch_tokens=BATCH_TOKENS,
                         precision="fp32").resolved()  # fmt: skip
    torch.manual_seed(1)
    model = Seq2Seq(config.model_config(VOCAB, VOCAB))
    device = torch.device("cpu")
    batches = prepared_batches(random_pairs(warmup + updates, BATCH_TOKENS, VOCAB, 1), BATCH_TOKENS,
                               warmup + updates, 1, device)  # fmt: skip
    updater = Updater(config, model, device)
    if mode == "compile":
        updater.network = torch.compile(model, dynamic=True)
    start = time.perf_counter()
    for batch in batches[:warmup]:
        updater.update(batch)
    compile_seconds = time.perf_counter() - start
    start, tokens = time.perf_counter(), 0
    for batch in batches[warmup:]:
        loss = updater.update(batch)
        tokens += batch.tgt_tokens
    seconds = time.perf_counter() - start
    print(f"{mode}: {updates / seconds:.3f} updates/s, {tokens / seconds:.0f} target tokens/s, last loss {loss:.4f} "
          f"(warm-up {compile_seconds:.0f} s)", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--modes", nargs="+", default=["eager", "compile"], choices=["eager", "compile"])
    parser.add_argument("--warmup", type=int, default=8, help="untimed updates (compilation happens here)")
    parser.add_argument("--updates", type=int, default=20, help="timed updates")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for mode in args.modes:
        measure(mode, args.warmup, args.updates)


if __name__ == "__main__":
    main()
