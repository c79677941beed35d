"""The ssru layer's full-sequence pass (training): the parallel scan (``SPEEDUPS.ssru_scan``, the default) against
the loop over positions, forward and backward, and the decoder step (incremental decoding) beside self-attention's.

    .venv/bin/python benchmarks/ssru_scan.py [--threads 1] [--batch 32] [--width 256] [--lengths 16,32,64]

Prints the median milliseconds of each (and the interquartile range) per length. Both passes give the same output up
to float rounding (tests/layers/test_ssru.py); the figure is only their cost.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from adlnmt.adl.registry import Side
from adlnmt.layers.base import Context, DecoderState
from adlnmt.layers.builder import build_chain
from adlnmt.layers.context import ModelOptions
from adlnmt.speedups import SPEEDUPS


def timed(work: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    """(median, first quartile, third quartile) of ``repeats`` timings in ms, after one warm-up call."""
    work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    quartiles = statistics.quantiles(times, n=4)
    return statistics.median(times), quartiles[0], quartiles[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--lengths", default="16,32,64")
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    options = ModelOptions(d_model=args.width, heads=4, dropout=0.0, max_len=512)
    layers = {name: build_chain(name, Side.DECODER, args.width, options) for name in ("ssru", "mh_dot_self_att")}
    print(f"threads {args.threads}, batch {args.batch}, width {args.width}, median (IQR) ms of {args.repeats}")
    for length in (int(n) for n in args.lengths.split(",")):
        x = torch.randn(args.batch, length, args.width, requires_grad=True)
        passes = {}
        for mode in ("always", "never"):  # the scan, the loop
            SPEEDUPS.ssru_scan = mode
            passes[mode] = timed(lambda x=x: layers["ssru"](x, Context()).sum().backward(), args.repeats)
        scan, loop = passes["always"], passes["never"]
        print(f"T={length:3d} forward+backward: scan {scan[0]:7.2f} ({scan[1]:.2f}-{scan[2]:.2f}), loop {loop[0]:7.2f} "
              f"({loop[1]:.2f}-{loop[2]:.2f}): loop / scan {loop[0] / scan[0]:.2f}")  # fmt: skip
        with torch.no_grad():
            for name, layer in layers.items():
                layer.eval()
                step = timed(lambda layer=layer, x=x: decode(layer, x), args.repeats)
                print(f"      {length} decoder steps, {name:15s}: {step[0]:7.2f} ({step[1]:.2f}-{step[2]:.2f})")
                layer.train()


def decode(layer: torch.nn.Module, x: torch.Tensor) -> None:
    """Every position of ``x`` [B, T, d] as one incremental decoder step."""
    ctx = Context(state=DecoderState(x.size(0)))
    layer.init_state(ctx)
    for t in range(x.size(1)):
        ctx.offset = ctx.state.step = t
        layer.step(x[:, t : t + 1], ctx)


if __name__ == "__main__":
    main()
