"""Benchmark (issue 71): adlnmt's and fairseq's training speed on one GPU, side by side, the same Transformer.

    # here, once (CPU): adlnmt's prepared data and fairseq's binarised copy of the very same subwords
    python benchmarks/fairseq_gpu.py prepare --work .fs71/work --fairseq-src .fs71/src
    # on the device (or the CPU with --device cpu for a dry run): one training per RUN, one after the other
    python benchmarks/fairseq_gpu.py train --work .fs71/work --fairseq-src .fs71/src --out OUT \\
        --runs fairseq:fp32 adlnmt:fp32 fairseq:bf16 adlnmt:bf16 fairseq:fp16 adlnmt:fp16

RUN is ``TOOLKIT:PRECISION[:FLAG,...]``: fairseq fp32 (no flag), ``--bf16`` or ``--fp16`` (fairseq's own mixed
precision: bf16/fp16 weights with fp32 master copies); adlnmt ``--precision fp32|bf16|fp16`` (autocast); FLAGs are
added to the toolkit's command (e.g. ``adlnmt:bf16:--compile``). Both see TF32 off in every run.

Model on both sides: pre-norm Transformer, d 512, 6+6 layers, 8 heads, FFN 2048 (ReLU, no dropout inside, as
fairseq's defaults), dropout 0.1 on the residual branches and embeddings, no attention dropout, all embeddings tied
(one joint 8k unigram sentencepiece vocabulary from ``adlnmt prepare``), label smoothing 0.1, Adam β (0.9, 0.98),
lr 5e-4 inverse-sqrt after 200 warm-up updates, seed 1. Batches: both fill a batch while max(source, target length incl.
EOS) × sentences ≤ ``--batch-tokens``; fairseq with ``--required-batch-size-multiple 1``. Each toolkit keeps its own
optimizer implementation (adlnmt: torch's fused AdamW with weight decay 0; fairseq: apex's FusedAdam when installed,
else its own Adam) and its own defaults otherwise (gradient clipping: adlnmt 1.0, fairseq none).

Measured per run: target tokens/s (EOS included, padding not) as each toolkit logs it every ``--log-interval``
updates, median over the intervals after ``--warmup`` updates (start-up, kernel selection and compilation excluded);
the peak GPU memory in use (nvidia-smi, every 0.2 s, minus what was in use before); the validation NLL in nats per
target token at the last update (adlnmt: ln of its validation perplexity; fairseq: its base-2 ``nll_loss`` × ln 2).
Writes OUT/fairseq_gpu.json, a Markdown table OUT/fairseq_gpu.md (also on stdout) and OUT/logs.tgz.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

from fairseq_compare import export_pieces, unzip_corpus

ROOT = Path(__file__).resolve().parent.parent
ENCODER = "pos -> repeat(6, res_nd(mh_dot_self_att) -> res_nd(ffl(dropout=0))) -> norm"
DECODER = "pos -> repeat(6, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl(dropout=0))) -> norm"
FAIRSEQ_MODEL = ["--arch", "transformer", "--encoder-layers", "6", "--decoder-layers", "6", "--encoder-embed-dim",
                 "512", "--decoder-embed-dim", "512", "--encoder-ffn-embed-dim", "2048", "--decoder-ffn-embed-dim",
                 "2048", "--encoder-attention-heads", "8", "--decoder-attention-heads", "8",
                 "--encoder-normalize-before", "--decoder-normalize-before", "--share-all-embeddings",
                 "--dropout", "0.1"]  # fmt: skip
FAIRSEQ_PRECISION = {"fp32": [], "bf16": ["--bf16"], "fp16": ["--fp16"]}
# fairseq's command line, with TF32 off as adlnmt has it (PyTorch's default lets cuDNN use TF32).
FAIRSEQ_LAUNCH = ("import sys, torch; torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False; "
                  "from fairseq_cli.{tool} import cli_main; sys.argv[0] = 'fairseq-{tool}'; cli_main()")  # fmt: skip
FAIRSEQ_INNER = re.compile(r"\bwps=([0-9.]+).*\bnum_updates=(\d+)")
FAIRSEQ_VALID = re.compile(r"valid on 'valid' subset \| .*\| nll_loss ([0-9.]+) \| .*\| num_updates (\d+)")
ADLNMT_INNER = re.compile(r"^update (\d+)/\d+ .* ([0-9,]+) tok/s")


def fairseq_env(fairseq_src: Path) -> dict[str, str]:
    paths = [str(fairseq_src), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": ":".join(p for p in paths if p), "PYTHONUNBUFFERED": "1"}


def prepare(work: Path, fairseq_src: Path) -> None:
    """adlnmt's data directory and fairseq's binarised copy of the same pieces (Multi30k de→en)."""
    files = unzip_corpus(work / "raw")
    data, text, binary = work / "data", work / "fairseq-text", work / "fairseq-bin"
    if not (data / "manifest.json").exists():
        subprocess.run([sys.executable, "-m", "adlnmt", "prepare", "--train-src", str(files["train.de"]),
                        "--train-tgt", str(files["train.en"]), "--valid-src", str(files["val.de"]), "--valid-tgt",
                        str(files["val.en"]), "--out", str(data), "--vocab-size", "8000", "--joint",
                        "--model-type", "unigram"], check=True)  # fmt: skip
    export_pieces(data, files, text)
    subprocess.run([sys.executable, "-c", FAIRSEQ_LAUNCH.format(tool="preprocess"), "--source-lang", "de",
                    "--target-lang", "en", "--trainpref", str(text / "train"), "--validpref", str(text / "valid"),
                    "--srcdict", str(text / "dict.txt"), "--tgtdict", str(text / "dict.txt"), "--destdir",
                    str(binary), "--workers", "2"], check=True, env=fairseq_env(fairseq_src))  # fmt: skip
    shutil.rmtree(text)


class GpuMemory:
    """The most GPU memory in use while a run goes, from nvidia-smi every 0.2 s, minus what was in use before."""

    def __init__(self) -> None:
        self.available = shutil.which("nvidia-smi") is not None
        self.base = self._used() if self.available else 0
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _used(self) -> int:
        query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "--id=0"]
        return int(subprocess.run(query, capture_output=True, text=True, check=True).stdout.split()[0])

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self._used())

    def __enter__(self) -> GpuMemory:
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.available:
            self._thread.join()

    def mib(self) -> int | None:
        return self.peak - self.base if self.available else None


def command(spec: str, args: argparse.Namespace, run_dir: Path) -> tuple[list[str], dict[str, str]]:
    toolkit, precision, *flags = spec.split(":")
    extra = [f for group in flags for f in group.split(",") if f]
    work, n = args.work, str(args.updates)
    if toolkit == "adlnmt":
        model = str(run_dir / "model")
        return [sys.executable, "-m", "adlnmt", "train", "--data", str(work / "data"), "--model", model,
                "--encoder", ENCODER, "--decoder", DECODER, "--d-model", "512", "--heads", "8", "--dropout", "0.1",
                "--label-smoothing", "0.1", "--tie-output", "--tie-source", "--batch-tokens", str(args.batch_tokens),
                "--lr", "5e-4", "--lr-schedule", "inverse-sqrt", "--warmup", "200", "--adam-beta2", "0.98",
                "--seed", "1", "--max-updates", n, "--checkpoint-interval", n, "--keep-last", "1", "--no-valid-bleu",
                "--patience", "0", "--no-progress", "--log-interval", str(args.log_interval), "--device", args.device,
                "--precision", precision, *extra], {**os.environ, "PYTHONUNBUFFERED": "1"}  # fmt: skip
    if toolkit == "fairseq":
        device = ["--cpu"] if args.device == "cpu" else []
        return [sys.executable, "-c", FAIRSEQ_LAUNCH.format(tool="train"), str(work / "fairseq-bin"), *device,
                "--task", "translation", "--source-lang", "de", "--target-lang", "en", *FAIRSEQ_MODEL,
                "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens",
                str(args.batch_tokens), "--required-batch-size-multiple", "1", "--optimizer", "adam", "--adam-betas",
                "(0.9,0.98)", "--lr", "5e-4", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "200",
                "--warmup-init-lr", "1e-7", "--seed", "1", "--max-update", n, "--validate-interval-updates", n,
                "--validate-interval", "100000", "--save-interval", "100000", "--no-save", "--save-dir",
                str(run_dir / "model"), "--log-format", "simple", "--log-interval", str(args.log_interval),
                *FAIRSEQ_PRECISION[precision], *extra], fairseq_env(args.fairseq_src)  # fmt: skip
    raise SystemExit(f"unknown toolkit in run {spec!r}: adlnmt or fairseq")


def rates(toolkit: str, log: str, warmup: int) -> list[float]:
    """Target tokens/s of each logged interval that starts at or after update ``warmup``."""
    found = []
    for line in log.splitlines():
        if toolkit == "fairseq" and (m := FAIRSEQ_INNER.search(line)):
            found.append((int(m.group(2)), float(m.group(1))))
        elif toolkit == "adlnmt" and (m := ADLNMT_INNER.match(line)):
            found.append((int(m.group(1)), float(m.group(2).replace(",", ""))))
    starts = [0, *(update for update, _ in found)][: len(found)]  # the update each interval starts after
    return [rate for (_, rate), start in zip(found, starts, strict=True) if start >= warmup]


def valid_nll(toolkit: str, log: str, run_dir: Path, updates: int) -> float | None:
    if toolkit == "fairseq":
        found = {int(m.group(2)): float(m.group(1)) * math.log(2) for m in FAIRSEQ_VALID.finditer(log)}
        return found.get(updates)
    metrics = run_dir / "model" / "metrics.jsonl"
    if not metrics.exists():
        return None
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return next((math.log(r["valid_ppl"]) for r in records if r.get("update") == updates and "valid_ppl" in r), None)


def train(args: argparse.Namespace) -> int:
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    deadline = time.monotonic() + args.seconds
    results = []
    for index, spec in enumerate(args.runs, 1):
        left = deadline - time.monotonic()
        if left < 20:
            print(f"skipped {spec}: {left:.0f} s left of --seconds", flush=True)
            continue
        name = f"{index:02d}_" + re.sub(r"[^A-Za-z0-9._-]+", "_", spec)  # a run named twice keeps both logs
        run_dir = Path(args.scratch) / name
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        argv, env = command(spec, args, run_dir)
        print(f"=== {spec} ({time.strftime('%H:%M:%S')}, {left:.0f} s left)", flush=True)
        start = time.monotonic()
        with GpuMemory() as memory, (logs / f"{name}.log").open("w") as log_file:
            try:
                status = subprocess.run(argv, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                                        timeout=left - 5).returncode  # fmt: skip
            except subprocess.TimeoutExpired:
                status = "timeout"
        wall = time.monotonic() - start
        log = (logs / f"{name}.log").read_text(errors="replace")
        toolkit = spec.split(":")[0]
        measured = rates(toolkit, log, args.warmup)
        result = {"run": spec, "exit": status, "wall_s": round(wall, 1), "intervals": measured,
                  "tokens_per_s": statistics.median(measured) if measured else None,
                  "peak_gpu_mib": memory.mib(), "valid_nll": valid_nll(toolkit, log, run_dir, args.updates),
                  "command": [*argv[:1], "-c", "<launch>", *argv[3:]] if toolkit == "fairseq" else argv}  # fmt: skip
        results.append(result)
        print(f"    exit {status}, {wall:.0f} s, tok/s {result['tokens_per_s']}, valid nll {result['valid_nll']}, "
              f"peak {result['peak_gpu_mib']} MiB", flush=True)  # fmt: skip
        if status != 0:
            print("\n".join(log.splitlines()[-15:]), flush=True)
    record = {"updates": args.updates, "batch_tokens": args.batch_tokens, "warmup": args.warmup,
              "device": args.device, "runs": results}  # fmt: skip
    (out / "fairseq_gpu.json").write_text(json.dumps(record, indent=1))
    table = markdown(results)
    (out / "fairseq_gpu.md").write_text(table)
    print(table)
    with tarfile.open(out / "logs.tgz", "w:gz") as archive:
        archive.add(logs, arcname="logs")
    shutil.rmtree(logs)
    return 0 if all(r["exit"] == 0 for r in results) else 1


def markdown(results: list[dict]) -> str:
    """The runs in order; an adlnmt run's ratio is to the mean of fairseq's runs in its precision."""
    fairseq: dict[str, list[float]] = {}
    for r in results:
        if r["run"].startswith("fairseq:") and r["tokens_per_s"]:
            fairseq.setdefault(r["run"].split(":")[1], []).append(r["tokens_per_s"])
    lines = ["| run | target tok/s (median) | × fairseq same precision (mean of its runs) | peak GPU MiB | "
             "valid NLL (nats) | wall s |", "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in results:
        runs = fairseq.get(r["run"].split(":")[1])
        rate, base = r["tokens_per_s"], statistics.mean(runs) if runs else None
        ratio = f"{rate / base:.2f}" if rate and base and r["run"].startswith("adlnmt:") else ""
        nll = f"{r['valid_nll']:.3f}" if r["valid_nll"] is not None else "–"
        shown = f"{rate:,.0f}" if rate else f"– (exit {r['exit']})"
        lines.append(f"| {r['run']} | {shown} | {ratio} | {r['peak_gpu_mib']} | {nll} | {r['wall_s']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    for step in ("prepare", "train"):
        p = sub.add_parser(step)
        p.add_argument("--work", type=Path, required=True, help="prepared data (adlnmt's data/, fairseq-bin/)")
        p.add_argument("--fairseq-src", type=Path, required=True, help="folder holding fairseq/ (fairseq_setup.py)")
    t = sub.choices["train"]
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--runs", nargs="+", required=True, help="TOOLKIT:PRECISION[:FLAG,...]")
    t.add_argument("--updates", type=int, default=400)
    t.add_argument("--warmup", type=int, default=100, help="updates left out of the tokens/s median")
    t.add_argument("--log-interval", type=int, default=50)
    t.add_argument("--batch-tokens", type=int, default=8192)
    t.add_argument("--device", default="cuda")
    t.add_argument("--seconds", type=float, default=1e9, help="start no run after this many seconds")
    t.add_argument("--scratch", default="/tmp/fairseq_gpu", help="where the runs' model folders go")
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.work, args.fairseq_src)
        return 0
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
