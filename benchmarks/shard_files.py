"""Benchmark: what the training shards of prepared data directories cost (issue 65's disk target) on disk, per
subword token of the training split, and in time when one is opened.

    .venv/bin/python benchmarks/shard_files.py DATA_DIR [DATA_DIR ...] [--repeats 5]

Bytes per token: the id arrays, the training shards (ids and their index: per-sentence lengths from data format 3,
``int64`` offsets before) and every file of the directory (validation, vocabularies, manifest). Opening training
shard 0, the fastest of ``--repeats``: the size and SHA-256 check of its files (once per directory in training) and
building its :class:`~adlnmt.data.dataset.Split` (format 3: the offsets' cumulative sum; formats 1 and 2: the
offsets' checks), without and with the scan of its ids against the vocabulary. Both grow with the shard, not with
the corpus. Run with ``PYTHONPATH=src``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from adlnmt.data.data_dir import INDEX_FILES, SIDES, DataDir
from adlnmt.data.dataset import Split
from adlnmt.data.digests import verify_digests


def bytes_per_token(data: DataDir) -> tuple[float, float, float]:
    """Bytes per training token of the ids, of the training shards and of the whole directory."""
    kept = data.manifest["splits"]["train"]
    tokens = max(kept["src_pieces"] + kept["tgt_pieces"], 1)
    ids = sum(f.stat().st_size for f in data.path.glob("train*.tokens.npy"))
    shards = sum(f.stat().st_size for f in data.path.glob("train*.npy"))
    every = sum(f.stat().st_size for f in data.path.iterdir() if f.is_file())
    return ids / tokens, shards / tokens, every / tokens


def fastest(action, repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``action``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def open_times(data: DataDir, repeats: int) -> tuple[float, float, float]:
    """Seconds to check training shard 0's files, to build its Split, and to build it with the ids' check."""
    entry = data.shards("train")[0]
    version = data.manifest["format_version"]
    kinds = ("tokens", INDEX_FILES[version])
    names = {side: {kind: entry["files"][side][kind] for kind in kinds} for side in SIDES}
    sizes = {"src": data.src_vocab.size, "tgt": data.tgt_vocab.size}
    check = fastest(lambda: verify_digests(data.path, entry), repeats) if version > 1 else 0.0
    split = fastest(lambda: Split("train", data.path, names, False, entry["pairs"]), repeats)
    checked = fastest(lambda: Split("train", data.path, names, False, entry["pairs"], sizes), repeats)
    return check, split, checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", type=Path, nargs="+")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("| data | format | pairs in shard 0 | pieces per sentence and side | bytes/token: ids, ids + index, "
          "directory | open shard 0 (ms): files' digests, Split, Split with id check |")  # fmt: skip
    print("|---|---:|---:|---:|---|---|")
    for path in args.data:
        data = DataDir.load(path)
        kept = data.manifest["splits"]["train"]
        per_side = (kept["src_pieces"] + kept["tgt_pieces"]) / max(2 * kept["kept"], 1)
        sizes = ", ".join(f"{value:.3f}" for value in bytes_per_token(data))
        times = ", ".join(f"{1000 * value:.1f}" for value in open_times(data, args.repeats))
        pairs = data.shards("train")[0]["pairs"]
        print(f"| {path} | {data.manifest['format_version']} | {pairs:,} | {per_side:.1f} | {sizes} | {times} |")


if __name__ == "__main__":
    main()
