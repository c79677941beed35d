"""Profile decoding (torch.profiler): where the time of a search goes, host side and device side.

    PYTHONPATH=src python benchmarks/profile_decode.py --preset transformer-small --device cuda --beam 5 \
        [--batch-size 64] [--sentences 256] [--speedups-off host_bookkeeping] [--rows 15]

Decodes random sources (forced output lengths, as ``adlnmt bench decode`` does for presets) once to warm up,
then once under the profiler; prints the wall time, the operators with the most host (self CPU) time, and the
number of host-device synchronisations (``cudaStreamSynchronize``/``cudaMemcpyAsync`` calls) per decoding step.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from adlnmt.bench.models import preset_configs, preset_model, random_sources, synthetic_lengths
from adlnmt.inference.search import SearchOptions, translate_ids
from adlnmt.speedups import speedups_off

SYNCHRONISING = ("cudaStreamSynchronize", "cudaMemcpyAsync", "cudaDeviceSynchronize")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="transformer-small")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--speedups-off", default="", help="comma-separated speedups to switch off")
    parser.add_argument("--rows", type=int, default=15)
    args = parser.parse_args()
    device = torch.device(args.device)
    config = preset_configs([args.preset], {})[args.preset]
    model = preset_model(config, 8000, 8000, seed=1, device=device).eval()
    rng = np.random.default_rng(1)
    lengths = synthetic_lengths(args.sentences, rng)
    sources = random_sources(lengths, 8000, rng)
    options = SearchOptions(beam=args.beam, nbest=1, batch_size=args.batch_size)
    off = [name for name in args.speedups_off.split(",") if name]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with speedups_off(*off) if off else torch.no_grad():
        translate_ids(model, sources[:16], options, device, exact_lengths=lengths[:16])  # warm-up
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        translate_ids(model, sources, options, device, exact_lengths=lengths)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        wall = time.perf_counter() - start
        with profile(activities=activities) as prof:
            translate_ids(model, sources, options, device, exact_lengths=lengths)
    events = prof.key_averages()
    syncs = {e.key: e.count for e in events if e.key in SYNCHRONISING}
    batches = -(-args.sentences // args.batch_size)
    print(f"{args.preset} on {device} beam {args.beam}, batch {args.batch_size}, {args.sentences} sentences, "
          f"speedups off: {off or 'none'}")  # fmt: skip
    print(f"wall time (unprofiled): {wall:.3f} s = {args.sentences / wall:.1f} sentences/s")
    print(f"synchronising calls: {syncs} over {batches} batches of ≤ {max(lengths) + 1} steps")
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
