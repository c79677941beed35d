"""Benchmark: decoding as a user times it. Each setting translates Multi30k test_2016_flickr as one process
(interpreter start, imports, model load, tokenisation, search, output: the whole command), greedy and beam 5;
reports seconds, BLEU and the process's peak RSS (``os.wait4``: the largest of it and its waited-for children).

    .venv/bin/python benchmarks/whole_command.py --model MODEL_DIR [--out DIR] [--repeat 1]

Settings: ``adlnmt translate`` with the torch engine in fp32 (2 threads) and int8 (2 worker processes), with
``--engine ctranslate2`` on fp32 and int8 exports of the same model (2 threads), and ``benchmarks/ct2_peer.py``
(a plain CTranslate2 script: ``translate_batch`` on batches of 64, fairseq's length rule) on the same exports.
The exports are written first (not timed). Runs are interleaved setting by setting; with ``--repeat N`` each
figure is the median of N. Results: ``OUT/whole_command.json`` and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import sacrebleu

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "data" / "multi30k"
ADLNMT = [sys.executable, "-m", "adlnmt"]
THREADS = "2"


def settings(model: Path, exports: dict[str, Path], beam: int, source: Path, output: Path) -> dict[str, list[str]]:
    """Setting name → its command line."""
    translate = [*ADLNMT, "translate", "--input", str(source), "--output", str(output), "--beam", str(beam)]
    engine = ["--engine", "ctranslate2", "--threads", THREADS]
    peer = [sys.executable, str(ROOT / "benchmarks" / "ct2_peer.py")]
    files = [str(source), str(output), "--beam", str(beam), "--threads", THREADS, "--compute-type"]
    return {
        "torch fp32, 2 threads": [*translate, "--model", str(model), "--threads", THREADS],
        "torch int8, 2 workers": [*translate, "--model", str(model), "--precision", "int8", "--workers", THREADS],
        "--engine ctranslate2 fp32": [*translate, "--model", str(exports["none"]), *engine],
        "--engine ctranslate2 int8": [*translate, "--model", str(exports["int8"]), *engine, "--precision", "int8"],
        "CT2 script fp32": [*peer, str(exports["none"]), *files, "float32"],
        "CT2 script int8": [*peer, str(exports["int8"]), *files, "int8"],
    }


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``command`` as a process; its failure stops the benchmark."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {' '.join(command)}\n{stderr}")
    return seconds, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a trained Multi30k de→en model directory")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "runs" / "whole_command")
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting (median reported)")
    parser.add_argument("--beams", default="1,5")
    args = parser.parse_args()
    if not (CORPUS / "test_2016_flickr.de.gz").is_file():
        print(f"skipped: Multi30k not found at {CORPUS}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    source, output = args.out / "test_2016_flickr.de", args.out / "hyp.en"
    source.write_bytes(gzip.decompress((CORPUS / "test_2016_flickr.de.gz").read_bytes()))
    references = gzip.decompress((CORPUS / "test_2016_flickr.en.gz").read_bytes()).decode().splitlines()
    exports = {quantize: args.out / f"ct2-{quantize}" for quantize in ("none", "int8")}
    for quantize, export in exports.items():
        if not (export / "export.json").is_file():
            subprocess.run([*ADLNMT, "export", "--model", str(args.model), "--format", "ctranslate2", "--out",
                            str(export), "--quantize", quantize], check=True)  # fmt: skip
    rows = []
    for beam in (int(b) for b in args.beams.split(",")):
        commands = settings(args.model, exports, beam, source, output)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        bleu: dict[str, float] = {}
        for _ in range(args.repeat):
            for name, command in commands.items():
                runs[name].append(timed(command))
                hypotheses = output.read_text(encoding="utf-8").splitlines()
                bleu[name] = sacrebleu.corpus_bleu(hypotheses, [references]).score
                print(f"beam {beam}, {name}: {runs[name][-1][0]:.2f} s, BLEU {bleu[name]:.2f}, "
                      f"load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)  # fmt: skip
        for name in commands:
            seconds = statistics.median(s for s, _ in runs[name])
            rows.append({"beam": beam, "setting": name, "seconds": seconds, "all_seconds": [s for s, _ in runs[name]],
                         "bleu": bleu[name], "peak_rss_mb": max(m for _, m in runs[name])})  # fmt: skip
    record = {"model": str(args.model), "repeat": args.repeat, "cpus": os.cpu_count(),
              "load_after": os.getloadavg(), "rows": rows}  # fmt: skip
    (args.out / "whole_command.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print("| search | setting | seconds | BLEU | peak RSS MB | × CT2 script int8 |\n|---|---|---:|---:|---:|---:|")
    for row in rows:
        peer = next(r["seconds"] for r in rows if r["beam"] == row["beam"] and r["setting"] == "CT2 script int8")
        search = "greedy" if row["beam"] == 1 else f"beam {row['beam']}"
        print(f"| {search} | {row['setting']} | {row['seconds']:.2f} | {row['bleu']:.2f} | {row['peak_rss_mb']:.0f} "
              f"| {peer / row['seconds']:.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
