"""Benchmark: ``adlnmt prepare`` on synthetic corpora of growing size (issue 65): wall time, pairs per second and the
peak memory of the whole process tree (the command and its encoding workers, summed RSS sampled every 0.1 s from
/proc), beside the load average. The corpus is ``adlnmt demo-corpus --size BASE`` repeated to each size.
``--first-update``: then ``adlnmt train`` (a d_model 32 Transformer, one thread) on each prepared directory, timed
from its start to the progress line of its first update, with its peak memory.

    .venv/bin/python benchmarks/prepare_scaling.py --sizes 1000000 10000000 --workers 1 2 [--before OLD/src]
    .venv/bin/python benchmarks/prepare_scaling.py --sizes 1000000 --first-update   # after the above: reuses data

``--before``: a ``src`` directory of an older adlnmt (e.g. ``git archive REV src | tar -x``) run the same way with
its own flags (one process, no sampling), for the before/after row. Results: ``WORK/prepare_scaling.json`` and a
Markdown table on stdout. Bytes per training token: the id arrays, the training shards (ids and their index: lengths
from data format 3, int64 offsets before) and every file of the directory (validation, vocabularies, manifest).
Linux only (/proc).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tree_rss(root: int) -> int:
    """Summed resident memory (bytes) of ``root`` and all its descendants."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            pages = int((entry / "statm").read_text().split()[1])
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(stat.rpartition(")")[2].split()[1])
        rss[pid] = pages * os.sysconf("SC_PAGE_SIZE")
    members, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid and child not in members]
        members.update(children)
        frontier += children
    return sum(rss.get(pid, 0) for pid in members)


def run_measured(command: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall seconds, peak tree RSS and stderr of ``command``; raises when it fails."""
    start = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while process.poll() is None:
        peak = max(peak, tree_rss(process.pid))
        time.sleep(0.1)
    seconds = time.monotonic() - start
    out, err = process.communicate()
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{err[-2000:]}")
    return seconds, peak, out + err


def first_update(data: Path, work: Path, env: dict[str, str]) -> tuple[float, int]:
    """Seconds from starting ``adlnmt train`` to the progress line of update 1, and the peak RSS until then."""
    model = work / f"model.{data.name}"
    shutil.rmtree(model, ignore_errors=True)
    block = "res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)"
    command = [sys.executable, "-m", "adlnmt", "train", "--data", str(data), "--model", str(model), "--d-model", "32",
               "--heads", "4", "--encoder", "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm",
               "--decoder", f"pos -> repeat(2, {block}) -> norm",
               "--batch-tokens", "4000", "--threads", "1", "--no-progress", "--log-interval", "1",
               "--max-updates", "2", "--no-valid-bleu", "--tensorboard", "off"]  # fmt: skip
    start = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    peak, seconds = 0, math.nan
    stderr = process.stderr.fileno()
    os.set_blocking(stderr, False)
    buffer = b""
    while process.poll() is None and math.isnan(seconds):
        peak = max(peak, tree_rss(process.pid))
        with contextlib.suppress(BlockingIOError):
            buffer += os.read(stderr, 1 << 16)
        if b"update 1/" in buffer:
            seconds = time.monotonic() - start
        time.sleep(0.05)
    process.kill()
    process.wait()
    if math.isnan(seconds):
        raise SystemExit(f"train failed:\n{buffer[-2000:].decode(errors='replace')}")
    return seconds, peak


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def corpus_of(size: int, base: Path, work: Path) -> tuple[Path, Path]:
    """The base training corpus repeated (and cut) to ``size`` pairs."""
    files = (work / f"train.{size}.src", work / f"train.{size}.tgt")
    if all(f.is_file() for f in files):
        return files
    for side, target in zip(("src", "tgt"), files, strict=True):
        lines = (base / f"train.{side}").read_bytes().splitlines(keepends=True)
        tmp = target.with_name(target.name + ".tmp")
        with tmp.open("wb") as handle:
            written = 0
            while written < size:
                chunk = lines[: size - written]
                handle.writelines(chunk)
                written += len(chunk)
        tmp.replace(target)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--base", type=int, default=100_000, help="pairs of the demo corpus that is repeated")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--spm-sample", type=int, default=1_000_000)
    parser.add_argument("--before", type=Path, help="src directory of an older adlnmt, run at the first size")
    parser.add_argument("--work", type=Path, default=Path("/tmp/prepare_scaling"))
    parser.add_argument("--first-update", action="store_true", help="time training's start on WORK/data.SIZE")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    base = args.work / "base"
    if not (base / "train.src").is_file():
        subprocess.run([python, "-m", "adlnmt", "demo-corpus", "--out", str(base), "--size", str(args.base)],
                       env=env, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    if args.first_update:
        print("| pairs | seconds to the first update | peak RSS (MB) | load before → after |")
        print("|---:|---:|---:|---|")
        for size in args.sizes:
            before_load = load()
            seconds, peak = first_update(args.work / f"data.{size}", args.work, env)
            print(f"| {size:,} | {seconds:.1f} | {peak / 2**20:.0f} | {before_load} → {load()} |", flush=True)
        return
    rows = []
    for size in args.sizes:
        src, tgt = corpus_of(size, base, args.work)
        common = ["--valid-src", str(base / "valid.src"), "--valid-tgt", str(base / "valid.tgt"),
                  "--vocab-size", str(args.vocab_size), "--overwrite"]  # fmt: skip
        runs: list[tuple[str, dict[str, str], list[str]]] = [
            (f"{workers} worker(s)", env, ["--spm-sample", str(args.spm_sample), "--workers", str(workers)])
            for workers in args.workers
        ]
        if args.before is not None and size == args.sizes[0]:
            runs.insert(0, ("before", {**env, "PYTHONPATH": str(args.before.resolve())}, []))
        for label, run_env, flags in runs:
            out = args.work / f"data.{size}"
            command = [python, "-m", "adlnmt", "prepare", "--train-src", str(src), "--train-tgt", str(tgt),
                       *common, "--out", str(out), *flags]  # fmt: skip
            before_load = load()
            seconds, peak, _ = run_measured(command, run_env)
            token_bytes = sum(f.stat().st_size for f in out.glob("train*.tokens.npy"))
            all_bytes = sum(f.stat().st_size for f in out.glob("train*.npy"))  # ids + lengths (offsets before format 3)
            directory_bytes = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
            pieces = json.loads((out / "manifest.json").read_text())["splits"]["train"]
            tokens = pieces["src_pieces"] + pieces["tgt_pieces"]
            row = {"pairs": size, "run": label, "seconds": round(seconds, 1), "pairs_per_s": round(size / seconds),
                   "peak_rss_mb": round(peak / 2**20), "token_bytes_per_token": round(token_bytes / max(tokens, 1), 3),
                   "bytes_per_token": round(all_bytes / max(tokens, 1), 3),
                   "directory_bytes_per_token": round(directory_bytes / max(tokens, 1), 3),
                   "load_before": before_load, "load_after": load()}  # fmt: skip
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            (args.work / "prepare_scaling.json").write_text(json.dumps(rows, indent=2) + "\n")
    print("| pairs | run | seconds | pairs/s | peak RSS (MB) | bytes/token: ids, ids + index, directory "
          "| load before → after |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---|---|")
    for r in rows:
        sizes = f"{r['token_bytes_per_token']}, {r['bytes_per_token']}, {r['directory_bytes_per_token']}"
        print(f"| {r['pairs']:,} | {r['run']} | {r['seconds']} | {r['pairs_per_s']:,} | {r['peak_rss_mb']} | "
              f"{sizes} | {r['load_before']} → {r['load_after']} |")  # fmt: skip


if __name__ == "__main__":
    main()
