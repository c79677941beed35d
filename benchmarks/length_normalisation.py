"""Measurement for the default length normalisation (issue 46 point 3): validation BLEU of every ranking rule
over several trained models.

    .venv/bin/python benchmarks/length_normalisation.py --model DIR[:CHECKPOINT] ... [--src S --ref R]

Each model decodes the validation set once, beam 5 with the 5-best kept and no penalty (``length_penalty=0``);
every rule then re-ranks those hypotheses: GNMT log_prob / ((5 + |Y|) / 6)^α for each α of ``--alphas``, and
fairseq's log_prob / |Y| (|Y| counts EOS). This is exactly what decoding with each rule gives: adlnmt's beam search
keeps its k best unfinished candidates by log-probability and stops a sentence once k hypotheses have ended, so the
finished hypotheses do not depend on the rule, only their final order does. Output: one row per rule with the
BLEU of every model, their mean, the mean change against the current default (α = 1.0) with its 95 % interval
(paired bootstrap over the validation sentences, the same draws for every model and rule: Koehn 2004) and the mean
length ratio (hypothesis / reference); ``OUT/length_normalisation.json`` keeps everything. Each model's 5-best
lists are cached in ``OUT/nbest/``, so a later call with more models decodes only the new ones.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import sacrebleu

from adlnmt.inference.options import DEFAULT_OPTIONS, SearchOptions, length_penalty
from adlnmt.metrics import segment_statistics
from adlnmt.verdicts.statistics import run_scores

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "data" / "multi30k"
Candidate = tuple[str, float, int]  # text, log-probability (EOS included), |Y| (pieces + EOS)
Rule = Callable[[Candidate], float]


def rules(alphas: list[float]) -> dict[str, Rule]:
    """Rule name → the score it ranks a hypothesis by."""
    found: dict[str, Rule] = {
        f"GNMT α={alpha:g}": lambda c, alpha=alpha: c[1] / length_penalty(c[2], alpha) for alpha in alphas
    }
    found["fairseq 1/|Y|"] = lambda c: c[1] / c[2]
    return found


def nbest(spec: str, sources: list[str], beam: int, threads: int, cache: Path) -> list[list[Candidate]]:
    """The ``beam``-best candidates of every source, unpenalised, from ``cache`` when an earlier call decoded the same
    sources (their digest names the file)."""
    digest = hashlib.sha256("\n".join(sources).encode()).hexdigest()[:12]
    path = cache / (spec.strip("/").replace("/", "_").replace(":", "@") + f".{digest}.beam{beam}.json")
    if path.is_file():
        return [[tuple(c) for c in hyps] for hyps in json.loads(path.read_text(encoding="utf-8"))]
    from adlnmt.inference.translator import Translator

    model, _, checkpoint = spec.partition(":")
    translator = Translator.load(model, checkpoint or "best", threads=threads)
    found = translator.search(sources, SearchOptions(beam=beam, nbest=beam, length_penalty=0.0))
    candidates = [[(t.text, t.log_prob, len(t.pieces) + 1) for t in hyps] for hyps in found]
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(candidates) + "\n", encoding="utf-8")
    return candidates


def read(path: Path) -> list[str]:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8").splitlines()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", nargs="+", required=True, help="model directories, each optionally DIR:CHECKPOINT")
    parser.add_argument("--src", type=Path, default=CORPUS / "val.de.gz")
    parser.add_argument("--ref", type=Path, default=CORPUS / "val.en.gz")
    parser.add_argument("--alphas", default="0,0.6,1,1.5,2,3")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "runs" / "length_normalisation")
    args = parser.parse_args()
    if not args.src.is_file():
        print(f"skipped: {args.src} not found")
        return 0
    sources, references = read(args.src), read(args.ref)
    ranking = rules([float(a) for a in args.alphas.split(",")])
    default = f"GNMT α={DEFAULT_OPTIONS.length_penalty:g}"
    bleu: dict[str, dict[str, float]] = {name: {} for name in ranking}
    ratio: dict[str, dict[str, float]] = {name: {} for name in ranking}
    replicates: dict[str, dict[str, np.ndarray]] = {name: {} for name in ranking}
    for spec in args.model:
        found = nbest(spec, sources, args.beam, args.threads, args.out / "nbest")
        for name, rule in ranking.items():
            hypotheses = [max(hyps, key=rule)[0] if hyps else "" for hyps in found]
            score = sacrebleu.corpus_bleu(hypotheses, [references])
            bleu[name][spec], ratio[name][spec] = score.score, score.sys_len / score.ref_len
            replicates[name][spec] = run_scores("bleu", segment_statistics("bleu", hypotheses, references)).replicates
        print(f"{spec}: " + ", ".join(f"{name} {bleu[name][spec]:.2f}" for name in ranking), file=sys.stderr)
    change: dict[str, tuple[float, float, float]] = {}
    for name in ranking:  # the mean change over the models, its replicates from the same sentence draws
        drawn = np.mean([replicates[name][m] - replicates[default][m] for m in args.model], axis=0)
        low, high = np.percentile(drawn, [2.5, 97.5])
        change[name] = statistics.mean(bleu[name][m] - bleu[default][m] for m in args.model), low, high
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"models": args.model, "src": str(args.src), "beam": args.beam, "bleu": bleu, "length_ratio": ratio,
              "change_vs_default": change}  # fmt: skip
    (args.out / "length_normalisation.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"| rule | {' | '.join(args.model)} | mean | Δ vs {default} [95 %] | length ratio |")
    print("|---|" + "---:|" * (len(args.model) + 3))
    for name in ranking:
        mean, low, high = change[name]
        cells = " | ".join(f"{bleu[name][m]:.2f}" for m in args.model)
        print(f"| {name} | {cells} | {statistics.mean(bleu[name].values()):.2f} | {mean:+.2f} [{low:+.2f}, "
              f"{high:+.2f}] | {statistics.mean(ratio[name].values()):.3f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
