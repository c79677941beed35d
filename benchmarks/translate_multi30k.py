"""Benchmark: translate Multi30k test_2016_flickr with a trained model, greedy and beam 5; time and score.

    .venv/bin/python benchmarks/translate_multi30k.py [--model benchmarks/runs/multi30k/model] [--threads 2]

Uses the model trained by ``benchmarks/train_multi30k.py``. For each setting it reports wall-clock
decoding time (model loaded, sentencepiece applied, batched search, detokenised output), sentences/s,
target tokens/s and BLEU/chrF/METEOR against the reference (sacreBLEU; METEOR exact+stem, see
``adlnmt score``). Results go to ``MODEL/../translate_results.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from adlnmt.inference.search import SearchOptions
from adlnmt.inference.translator import Translator
from adlnmt.metrics import format_report, read_lines, score

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "benchmarks" / "runs" / "multi30k" / "raw"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=ROOT / "benchmarks" / "runs" / "multi30k" / "model")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--beams", default="1,5")
    parser.add_argument("--workers", type=int, default=1, help="forked 1-thread decoding processes (see --workers)")
    parser.add_argument("--precision", default="fp32", help="fp32, bf16 or int8 on the CPU (see adlnmt translate)")
    args = parser.parse_args()
    if not (args.model / "config.json").exists() or not (RAW / "test_2016_flickr.de").exists():
        print(f"skipped: run benchmarks/train_multi30k.py first (no model at {args.model})")
        return 0
    torch.set_num_threads(args.threads)
    sources = read_lines(RAW / "test_2016_flickr.de")
    references = read_lines(RAW / "test_2016_flickr.en")
    translator = Translator.load(args.model, args.checkpoint, precision=args.precision)
    results = {"threads": args.threads, "precision": args.precision, "workers": args.workers,
               "torch": torch.__version__, "sentences": len(sources), "runs": {}}  # fmt: skip
    for beam in (int(b) for b in args.beams.split(",")):
        start = time.perf_counter()
        found = translator.search(sources, SearchOptions(beam=beam, batch_size=args.batch_size, workers=args.workers))
        seconds = time.perf_counter() - start
        hypotheses = [hyps[0].text if hyps else "" for hyps in found]
        tokens = sum(len(hyps[0].pieces) + 1 for hyps in found if hyps)
        scores = score(hypotheses, references, ("bleu", "chrf", "meteor"))
        (args.model.parent / f"test_2016_flickr.beam{beam}.en").write_text("\n".join(hypotheses) + "\n")
        results["runs"][f"beam{beam}"] = {
            "seconds": seconds,
            "sentences_per_s": len(sources) / seconds,
            "target_tokens_per_s": tokens / seconds,
            **{k: v for k, v in scores.items() if not k.endswith("_label")},
        }
        print(f"beam {beam}: {seconds:.1f} s, {len(sources) / seconds:.1f} sent/s, {tokens / seconds:.0f} tok/s")
        print(format_report(scores))
    (args.model.parent / "translate_results.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
