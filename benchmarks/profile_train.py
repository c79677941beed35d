"""Where a training update's time goes: torch.profiler over the trainer's own update (``adlnmt bench train``'s
``Updater``) on the model of ``fairseq_gpu.py`` (pre-norm Transformer d 512, 6+6) and random sentence pairs.

    python benchmarks/profile_train.py --device cuda --precision bf16 [--batch-tokens 8192] [--compile] \
        [--compare-off SPEEDUP]

Prints the wall time per update, the GPU's busy time per update (the sum of its kernels' times), the kernel launches
and host-device synchronisations per update, and the operators with the most GPU and host time. With
``--compare-off``, then times the same updates without the profiler, with the speedup on and off (``adlnmt.speedups``),
alternating for ``--rounds`` rounds, and prints each round's ms/update and the ratio off / on.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import torch
from fairseq_gpu import DECODER, ENCODER
from torch.profiler import ProfilerActivity, profile

from adlnmt.bench.train import Updater, prepared_batches, random_pairs
from adlnmt.model import Seq2Seq
from adlnmt.speedups import speedups_off
from adlnmt.train.config import TrainConfig
from adlnmt.train.device import full_fp32

VOCAB = 8000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--batch-tokens", type=int, default=8192)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--rows", type=int, default=12)
    parser.add_argument("--compare-off", metavar="SPEEDUP", help="also time the updates with this speedup off")
    parser.add_argument("--rounds", type=int, default=3, help="--compare-off: on/off rounds")
    args = parser.parse_args()
    full_fp32()
    device = torch.device(args.device)
    config = TrainConfig(encoder=ENCODER, decoder=DECODER, d_model=512, heads=8, dropout=0.1, label_smoothing=0.1,
                         tie_output=True, tie_source=True, batch_tokens=args.batch_tokens, precision=args.precision,
                         device=args.device, compile=args.compile).resolved()  # fmt: skip
    torch.manual_seed(1)
    model = Seq2Seq(config.model_config(VOCAB, VOCAB)).to(device)
    total = args.warmup + args.updates
    batches = prepared_batches(random_pairs(total, args.batch_tokens, VOCAB, 1), args.batch_tokens, total, 1, device)
    updater = Updater(config, model, device)
    if args.compile:  # as the trainer compiles: the sinusoid tables filled first
        model.cover_positions(max(max(b.src.size(1), b.tgt_in.size(1)) for b in batches), device)
        updater.network = torch.compile(model, dynamic=True)
    for batch in batches[: args.warmup]:
        updater.update(batch)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for batch in batches[args.warmup :]:
            updater.update(batch)
        sync()
        wall = time.perf_counter() - start
    tokens = sum(b.tgt_tokens for b in batches[args.warmup :])
    events = prof.key_averages()
    n = args.updates
    # ms of the kernels themselves (operators' device time counts the same kernels again; one stream: no overlap)
    busy = sum(e.self_device_time_total for e in events if e.device_type == torch.autograd.DeviceType.CUDA) / 1e3
    calls = Counter(e.key for e in events for _ in range(e.count))
    launches = sum(calls[k] for k in calls if k in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC"))
    syncs = sum(calls[k] for k in calls if "Synchronize" in k)
    copies = sum(calls[k] for k in calls if k.startswith("cudaMemcpy"))
    print(f"{args.precision}{' compiled' if args.compile else ''}, {args.batch_tokens} batch tokens, {n} updates: "
          f"{1e3 * wall / n:.1f} ms/update wall, {busy / n:.1f} ms/update GPU busy ({100 * busy / 1e3 / wall:.0f} %), "
          f"{tokens / wall:,.0f} target tok/s; per update {launches / n:.0f} kernel launches, {syncs / n:.1f} "
          f"synchronisations, {copies / n:.1f} memcpy calls")  # fmt: skip
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(events.table(sort_by=sort, row_limit=args.rows, max_name_column_width=60))
    if device.type == "cuda":
        print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=60))
    if args.compare_off:
        compare(updater, batches[args.warmup :], args.compare_off, args.rounds, sync)


def compare(updater: Updater, batches: list, speedup: str, rounds: int, sync) -> None:
    """ms/update of ``batches`` with ``speedup`` on and off, alternating (no profiler)."""

    def timed() -> float:
        sync()
        start = time.perf_counter()
        for batch in batches:
            updater.update(batch)
        sync()
        return 1e3 * (time.perf_counter() - start) / len(batches)

    for round_ in range(1, rounds + 1):
        on = timed()
        with speedups_off(speedup):
            off = timed()
        print(f"round {round_}: {on:.1f} ms/update with {speedup}, {off:.1f} without: off / on {off / on:.3f}")


if __name__ == "__main__":
    main()
