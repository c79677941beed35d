"""Benchmark: decoding as a user times it. Each setting translates Multi30k test_2016_flickr as one process
(interpreter start, imports, model load, tokenisation, search, output: the whole command), greedy and beam 5;
reports seconds, BLEU and the process's peak RSS (``os.wait4``: the largest of it and its waited-for children).

    .venv/bin/python benchmarks/whole_command.py --model MODEL_DIR [--baseline MODEL_DIR] [--checkpoint best]
                                                 [--out DIR] [--repeat 1] [--alone]
                                                 [--shortlist FILE]

Settings: ``adlnmt translate`` with the torch engine in fp32 (2 threads) and int8 (2 worker processes), with
``--engine ctranslate2`` on fp32 and int8 exports of the same model (2 threads; int8 also with 2 single-thread
workers), and ``benchmarks/ct2_peer.py`` (a plain CTranslate2 script: ``translate_batch`` on batches of 64,
fairseq's length rule) on the same exports (int8 also with 2 single-thread replicas).
With ``--shortlist FILE``, the torch int8 and ``--engine ctranslate2`` int8 settings run again with it. The
exports are written first (not timed); a model CTranslate2 cannot run (an AAN, SSRU or RNN decoder) has the torch
settings only. Runs are interleaved setting by setting; with ``--repeat N`` each figure is the median of N.
With ``--baseline`` (e.g. a distillation's teacher) every setting runs for the baseline right after the model, and
the speed-up is the baseline's seconds over the model's, pair by pair (median, min–max): a drifting machine moves
both of a pair. ``--alone`` stops the adlnmt training workers of every grid on the machine meanwhile (as a grid's
timed decoding does; their paused time is taken out of their training time). Results: ``OUT/whole_command.json``
and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
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
PEER = "CT2 script int8"


def settings(model: Path, checkpoint: str, exports: dict[str, Path] | None, beam: int, source: Path, output: Path,
             shortlist: Path | None = None) -> dict[str, list[str]]:  # fmt: skip
    """Setting name → its command line (the torch engine's only where ``exports`` is None; with ``shortlist``, the
    fastest adlnmt settings again with it)."""
    translate = [*ADLNMT, "translate", "--input", str(source), "--output", str(output), "--beam", str(beam)]
    weights = ["--model", str(model), "--checkpoint", checkpoint]
    listed = ["--shortlist", str(shortlist)] if shortlist else []
    int8_workers = [*translate, *weights, "--precision", "int8", "--workers", THREADS]
    torch = {
        "torch fp32, 2 threads": [*translate, *weights, "--threads", THREADS],
        "torch int8, 2 workers": int8_workers,
        **({"torch int8, 2 workers, shortlist": [*int8_workers, *listed]} if shortlist else {}),
    }
    if exports is None:
        return torch
    engine = ["--engine", "ctranslate2", "--threads", THREADS]
    peer = [sys.executable, str(ROOT / "benchmarks" / "ct2_peer.py")]
    files = [str(source), str(output), "--beam", str(beam), "--threads", THREADS, "--compute-type"]
    int8 = [*translate, "--model", str(exports["int8"]), *engine, "--precision", "int8"]
    return {
        **torch,
        "--engine ctranslate2 fp32": [*translate, "--model", str(exports["none"]), *engine],
        "--engine ctranslate2 int8": int8,
        "--engine ctranslate2 int8, 2 workers": [*int8, "--workers", THREADS],
        **({"--engine ctranslate2 int8, shortlist": [*int8, *listed]} if shortlist else {}),
        "CT2 script fp32": [*peer, str(exports["none"]), *files, "float32"],
        PEER: [*peer, str(exports["int8"]), *files, "int8"],
        f"{PEER}, 2 workers": [*peer, str(exports["int8"]), *files, "int8", "--workers", THREADS],
    }


def ctranslate2_exports(model: Path, checkpoint: str, out: Path) -> dict[str, Path] | None:
    """The model's fp32 and int8 CTranslate2 exports under ``out`` (made once); None when it cannot be exported."""
    exports = {quantize: out / f"ct2-{quantize}" for quantize in ("none", "int8")}
    for quantize, export in exports.items():
        if not (export / "export.json").is_file():
            command = [*ADLNMT, "export", "--model", str(model), "--checkpoint", checkpoint, "--format",
                       "ctranslate2", "--out", str(export), "--quantize", quantize]  # fmt: skip
            made = subprocess.run(command, capture_output=True, text=True, check=False)
            if made.returncode != 0:
                reason = (made.stderr.strip().splitlines() or ["no message"])[-1]
                print(f"{model}: no CTranslate2 export, torch settings only ({reason})", file=sys.stderr)
                return None
    return exports


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


def training_stopped(alone: bool) -> contextlib.AbstractContextManager:
    """Every adlnmt training worker on the machine stopped meanwhile (``alone``), else nothing."""
    if not alone:
        return contextlib.nullcontext()
    from adlnmt.experiment.quiet import machine_alone

    return machine_alone()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a trained Multi30k de→en model directory")
    parser.add_argument("--baseline", type=Path, help="a second model each setting is compared with, pair by pair")
    parser.add_argument("--checkpoint", default="best", help="of both models: best, last or averaged")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "runs" / "whole_command")
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting (median reported)")
    parser.add_argument("--beams", default="1,5")
    parser.add_argument("--alone", action="store_true", help="stop adlnmt's training workers meanwhile")
    parser.add_argument("--shortlist", type=Path, help="a lexical shortlist (adlnmt shortlist): adds its settings")
    args = parser.parse_args()
    if not (CORPUS / "test_2016_flickr.de.gz").is_file():
        print(f"skipped: Multi30k not found at {CORPUS}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    source, output = args.out / "test_2016_flickr.de", args.out / "hyp.en"
    source.write_bytes(gzip.decompress((CORPUS / "test_2016_flickr.de.gz").read_bytes()))
    references = gzip.decompress((CORPUS / "test_2016_flickr.en.gz").read_bytes()).decode().splitlines()
    models = {"model": args.model, **({"baseline": args.baseline} if args.baseline else {})}
    exports = {label: ctranslate2_exports(model, args.checkpoint, args.out / label) for label, model in models.items()}
    rows = []
    with training_stopped(args.alone):
        for beam in (int(b) for b in args.beams.split(",")):
            commands = {
                label: settings(model, args.checkpoint, exports[label], beam, source, output, args.shortlist)
                for label, model in models.items()
            }
            names = [name for name in commands["model"] if all(name in c for c in commands.values())]
            runs = {(label, name): [] for label in models for name in names}
            bleu: dict[tuple[str, str], float] = {}
            for _ in range(args.repeat):
                for name in names:
                    for label in models:  # the baseline right after the model: a pair
                        runs[label, name].append(timed(commands[label][name]))
                        hypotheses = output.read_text(encoding="utf-8").splitlines()
                        bleu[label, name] = sacrebleu.corpus_bleu(hypotheses, [references]).score
                        print(f"beam {beam}, {label}, {name}: {runs[label, name][-1][0]:.2f} s, BLEU "
                              f"{bleu[label, name]:.2f}, load {os.getloadavg()[0]:.1f}", file=sys.stderr,
                              flush=True)  # fmt: skip
            for label in models:
                for name in names:
                    seconds = [s for s, _ in runs[label, name]]
                    rows.append({"model": label, "beam": beam, "setting": name, "seconds": statistics.median(seconds),
                                 "all_seconds": seconds, "bleu": bleu[label, name],
                                 "peak_rss_mb": max(m for _, m in runs[label, name])})  # fmt: skip
    record = {"models": {label: str(model) for label, model in models.items()}, "checkpoint": args.checkpoint,
              "shortlist": str(args.shortlist) if args.shortlist else None, "repeat": args.repeat,
              "cpus": os.cpu_count(), "alone": args.alone, "load_after": os.getloadavg(), "rows": rows}  # fmt: skip
    (args.out / "whole_command.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(table(rows))
    return 0


def table(rows: list[dict]) -> str:
    """The Markdown table of ``rows``: the model's settings, with the baseline's beside them where there is one."""
    model = [row for row in rows if row["model"] == "model"]
    baseline = {(row["beam"], row["setting"]): row for row in rows if row["model"] == "baseline"}
    peer: dict[int, float] = {}  # the faster CT2 script int8 setting of each beam
    for row in model:
        if row["setting"].startswith(PEER):
            peer[row["beam"]] = min(row["seconds"], peer.get(row["beam"], row["seconds"]))
    head = "| search | setting | seconds | BLEU | peak RSS MB | × the faster CT2 script int8 |"
    if baseline:
        head += " baseline seconds | baseline BLEU | speed-up over the baseline (pairs: median, min–max) |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in model:
        search = "greedy" if row["beam"] == 1 else f"beam {row['beam']}"
        versus = f"{peer[row['beam']] / row['seconds']:.2f}" if row["beam"] in peer else "–"
        line = (f"| {search} | {row['setting']} | {row['seconds']:.2f} | {row['bleu']:.2f} | "
                f"{row['peak_rss_mb']:.0f} | {versus} |")  # fmt: skip
        if other := baseline.get((row["beam"], row["setting"])):
            ratios = [b / m for b, m in zip(other["all_seconds"], row["all_seconds"], strict=True)]
            line += (f" {other['seconds']:.2f} | {other['bleu']:.2f} | {statistics.median(ratios):.2f} "
                     f"({min(ratios):.2f}–{max(ratios):.2f}) |")  # fmt: skip
        lines.append(line)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
