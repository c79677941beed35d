"""Load test of ``adlnmt serve``: concurrent clients sending one sentence per request, batched vs unbatched.

    PYTHONPATH=src .venv/bin/python benchmarks/serve_load.py --model DIR [--clients 1,4,16,64] [--requests 256]
        [--seconds 30] [--threads 1] [--beam 5]

For each server mode — cross-request batching (``--max-batch-sentences 32 --max-wait-ms 10``, the defaults) and
one request at a time (``--max-batch-sentences 1 --max-wait-ms 0``) — it starts a real server on a free loopback
port, warms it up, then for each client count runs that many asyncio (httpx2) clients, each sending single-sentence
requests back to back until ``--requests`` requests are sent or ``--seconds`` have passed (both bound every level).
It reports sentences/s, p50/p99 latency, errors (non-200 answers and transport errors), the mean batch size the
server formed (from ``GET /health``) and the server's RSS (current and peak) after the level.

Sentences: Multi30k's test_2016_flickr.de (the German side) from ``../shared/data/multi30k`` relative to the repository
(or ``--data``); without it, the test split of ``adlnmt demo-corpus``. The model must translate from that side's
language for the translations to mean anything; the speed figures do not depend on it.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parents[1]
CORPORA = [ROOT.parent / "shared" / "data" / "multi30k", ROOT.parents[1] / "shared" / "data" / "multi30k"]
MODES = {"batched": ["--max-batch-sentences", "32", "--max-wait-ms", "10"],
         "one at a time": ["--max-batch-sentences", "1", "--max-wait-ms", "0"]}  # fmt: skip


def test_sentences(data: Path | None) -> tuple[list[str], str]:
    """The sentences to send and where they come from."""
    for folder in [data] if data else CORPORA:
        path = folder / "test_2016_flickr.de.gz"
        if path.is_file():
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                return handle.read().splitlines(), str(path)
    from adlnmt.data.demo import write_demo_corpus

    corpus = Path(tempfile.mkdtemp(prefix="serve-load-")) / "corpus"
    write_demo_corpus(corpus, size=1200, seed=1)
    return (corpus / "test.src").read_text(encoding="utf-8").splitlines(), "adlnmt demo-corpus (test.src)"


def memory_mb(pid: int) -> tuple[float, float]:
    """Current and peak resident memory of a process, in MB (Linux /proc)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return tuple(int(fields[name].split()[0]) / 1024 for name in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def start_server(model: Path, threads: int, flags: list[str]) -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": str(threads)}
    command = [sys.executable, "-m", "adlnmt", "serve", "--model", str(model), "--port", str(port),
               "--threads", str(threads), "--max-queue-sentences", "100000", *flags]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx2.get(f"{url}/health", timeout=2).status_code == 200:
                return process, url
        except httpx2.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"adlnmt serve did not start (exit status {process.poll()})")


async def level(url: str, sentences: list[str], clients: int, requests: int, seconds: float, beam: int) -> dict:
    """``clients`` concurrent clients, one sentence per request, at most ``requests`` requests and ``seconds``."""
    numbers = itertools.count()
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    limits = httpx2.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx2.AsyncClient(timeout=300, limits=limits) as client:

        async def one_client() -> None:
            while time.monotonic() < deadline and (number := next(numbers)) < requests:
                body = {"text": [sentences[number % len(sentences)]], "beam": beam}
                started = time.perf_counter()
                try:
                    reply = await client.post(f"{url}/translate", json=body)
                except httpx2.HTTPError as err:
                    errors[type(err).__name__] += 1
                    continue
                if reply.status_code != 200:
                    errors[str(reply.status_code)] += 1
                    continue
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        wall = time.perf_counter() - started
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")  # noqa: E731
    return {"clients": clients, "answered": len(latencies), "wall_s": wall, "sentences_per_s": len(latencies) / wall,
            "p50_ms": pick(0.50), "p99_ms": pick(0.99), "mean_ms": statistics.fmean(latencies) * 1000 if latencies
            else float("nan"), "errors": dict(errors)}  # fmt: skip


def run_mode(name: str, args: argparse.Namespace, sentences: list[str]) -> list[dict[str, Any]]:
    process, url = start_server(args.model, args.threads, MODES[name])
    rows = []
    try:
        asyncio.run(level(url, sentences[-20:], 2, 20, 60, args.beam))  # warm-up (not reported)
        for clients in args.clients:
            before = httpx2.get(f"{url}/health").json()["batching"]
            row = asyncio.run(level(url, sentences, clients, args.requests, args.seconds, args.beam))
            after = httpx2.get(f"{url}/health").json()["batching"]
            batches = after["batches"] - before["batches"]
            row["mean_batch"] = (after["sentences"] - before["sentences"]) / batches if batches else float("nan")
            row["rss_mb"], row["peak_rss_mb"] = memory_mb(process.pid)
            row["mode"] = name
            rows.append(row)
            print(f"  {name}, {clients} clients: {row['sentences_per_s']:.1f} sentences/s", file=sys.stderr)
    finally:
        process.terminate()
        process.wait(60)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="model directory to serve")
    parser.add_argument("--data", type=Path, help="folder with test_2016_flickr.de.gz (default ../shared/...)")
    parser.add_argument("--clients", default="1,4,16,64", help="client counts (default 1,4,16,64)")
    parser.add_argument("--requests", type=int, default=256, help="most requests per level (default 256)")
    parser.add_argument("--seconds", type=float, default=30, help="most seconds per level (default 30)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the server (default 1)")
    parser.add_argument("--beam", type=int, default=5, help="beam size of every request (default 5)")
    args = parser.parse_args()
    args.clients = [int(count) for count in args.clients.split(",")]
    if not (args.model / "config.json").is_file() and not (args.model / "export.json").is_file():
        print(f"skipped: no model directory at {args.model}")
        return
    sentences, source = test_sentences(args.data)
    print(f"sentences: {len(sentences)} from {source}; beam {args.beam}; server threads {args.threads}",
          file=sys.stderr)  # fmt: skip
    rows = [row for name in MODES for row in run_mode(name, args, sentences)]
    print("| server | clients | answered | sentences/s | p50 ms | p99 ms | mean batch | errors | RSS MB (peak) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        errors = ", ".join(f"{k}: {v}" for k, v in r["errors"].items()) or "0"
        print(
            f"| {r['mode']} | {r['clients']} | {r['answered']} | {r['sentences_per_s']:.1f} | {r['p50_ms']:.0f} | "
            f"{r['p99_ms']:.0f} | {r['mean_batch']:.1f} | {errors} | {r['rss_mb']:.0f} ({r['peak_rss_mb']:.0f}) |"
        )


if __name__ == "__main__":
    main()
