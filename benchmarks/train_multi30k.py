"""Benchmark: train the Multi30k de→en Transformer on this machine for a fixed wall-clock budget.

    .venv/bin/python benchmarks/train_multi30k.py [--minutes 60] [--out benchmarks/runs/multi30k] [--device auto]

Prepares Multi30k task 1 (de→en, joint sentencepiece 8k) from ../shared/data/multi30k, trains a
pre-norm Transformer (d_model 256, 3+3 layers, 4 heads, d_ff 1024, dropout 0.1, label smoothing 0.1),
then reports training target tokens/s, peak RSS of the training process, best validation BLEU and
test_2016_flickr BLEU/chrF (sacreBLEU, cased, detokenised; beam 5 unless --beam). Results go to
``OUT/results.json``. Skips with a message when the corpus is absent.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "data" / "multi30k"
ADLNMT = [sys.executable, "-m", "adlnmt"]


def unzip(name: str, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        target.write_bytes(gzip.decompress((CORPUS / name).read_bytes()))
    return target


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def run(command: list[str]) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0, help="training wall-clock budget")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "runs" / "multi30k")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-tokens", type=int, default=4000)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=800)
    parser.add_argument("--max-updates", type=int, default=0, help="stop after this many updates (0: budget only)")
    parser.add_argument("--precision", default="fp32", help="fp32, or bf16 autocast (AMX/AVX-512 bf16 CPUs, CUDA)")
    parser.add_argument("--beam", type=int, default=5, help="beam size for the test translation (1 = greedy)")
    parser.add_argument("--device", default="auto", help="auto (a GPU if any), cpu, cuda or cuda:N")
    parser.add_argument("--checkpoint-interval", type=int, default=500)
    args = parser.parse_args()
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if not CORPUS.is_dir():
        print(f"skipped: Multi30k not found at {CORPUS}")
        return 0
    raw, data, model = args.out / "raw", args.out / "data", args.out / "model"
    files = {f"{split}.{lang}": unzip(f"{split}.{lang}.gz", raw / f"{split}.{lang}")
             for split in ("train", "val", "test_2016_flickr") for lang in ("de", "en")}  # fmt: skip
    if not (data / "manifest.json").exists():
        run([*ADLNMT, "prepare", "--train-src", str(files["train.de"]), "--train-tgt", str(files["train.en"]),
             "--valid-src", str(files["val.de"]), "--valid-tgt", str(files["val.en"]), "--out", str(data),
             "--vocab-size", "8000", "--joint"])  # fmt: skip
    start = time.monotonic()
    run([*ADLNMT, "train", "--data", str(data), "--model", str(model), "--preset", "transformer-small",
         "--d-model", "256", "--heads", "4", "--d-ff", "1024", "--dropout", "0.1", "--label-smoothing", "0.1",
         "--batch-tokens", str(args.batch_tokens), "--lr", str(args.lr), "--lr-schedule", "inverse-sqrt",
         "--warmup", str(args.warmup), "--max-minutes", str(args.minutes),
         "--checkpoint-interval", str(args.checkpoint_interval),
         "--patience", "0", "--threads", str(args.threads), "--no-progress", "--precision", args.precision,
         "--max-updates", str(args.max_updates), "--device", device])  # fmt: skip
    train_wall = time.monotonic() - start
    peak_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    hyp = args.out / "test_2016_flickr.hyp.en"
    run([*ADLNMT, "translate", "--model", str(model), "--input", str(files["test_2016_flickr.de"]),
         "--output", str(hyp), "--beam", str(args.beam), "--device", device])  # fmt: skip
    scores = json.loads(subprocess.run([*ADLNMT, "score", "--hyp", str(hyp), "--ref",
                                        str(files["test_2016_flickr.en"]), "--json"],
                                       check=True, capture_output=True, text=True).stdout)  # fmt: skip
    log = [json.loads(line) for line in (model / "metrics.jsonl").read_text().splitlines()]
    results = {
        "machine": {
            "cpu": cpu_model(),
            "python": platform.python_version(),
            "threads": args.threads,
            "device": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
        },
        "precision": args.precision,
        "budget_minutes": args.minutes,
        "train_wall_minutes": train_wall / 60,
        "updates": log[-1]["update"],
        "epochs": log[-1]["epoch"],
        "train_tokens_per_s_mean": sum(r["tokens_per_s"] for r in log) / len(log),
        "peak_rss_mb": peak_rss_mb,
        "best_valid_bleu": max(r.get("valid_bleu", 0.0) for r in log),
        "test_bleu": scores["bleu"],
        "test_chrf": scores["chrf"],
        "bleu_signature": scores["bleu_signature"],
        "decoding": "greedy" if args.beam == 1 else f"beam {args.beam}, length penalty 1.0",
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
