"""Benchmark of lexically constrained decoding (issue 70): Multi30k de→en test_2016_flickr with one or two content
words of each reference as include constraints, against the unconstrained search of the same model.

    python benchmarks/constraints_multi30k.py --model DIR [--model DIR2] [--threads 1] [--repeats 3]
    (also --beam 5, --sentences 1000, --seed 1, --data ../shared/data/multi30k beside the repository)

Constraints: per sentence, one (then two) words drawn (seeded) from the reference's content words (letters only, at
least three of them, not in a short list of function words), as target text; the phrases go through the target
sentencepiece model like any constraint. For each model and setting it prints BLEU (sacreBLEU, against the full
reference), the share of sentences whose translation has every phrase (and of the phrases met), how many lines fell
back to the unconstrained translation (warnings), the mean output length in pieces, search seconds (the fastest of
--repeats searches, the settings taking turns; batched search only: sentencepiece encoding and model loading not
counted) and the extra milliseconds per constraint. The machine's load is printed with the figures.
Figures: benchmarks/NOTES.md ("Lexically constrained decoding").
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import re
import time
from pathlib import Path

import torch

from adlnmt.inference.constraints import Constraints, unmet
from adlnmt.inference.search import SearchOptions
from adlnmt.inference.translator import Translator
from adlnmt.metrics import score

MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"
FUNCTION_WORDS = frozenset(
    {
        "the",
        "and",
        "are",
        "with",
        "his",
        "her",
        "its",
        "their",
        "for",
        "from",
        "into",
        "onto",
        "over",
        "under",
        "this",
        "that",
        "these",
        "those",
        "there",
        "while",
        "wearing",
        "has",
        "have",
        "who",
        "what",
        "which",
        "one",
        "two",
        "three",
        "some",
        "another",
        "other",
        "near",
        "next",
        "down",
        "out",
        "off",
        "very",
        "front",
        "side",
        "each",
    }
)


def read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def content_words(reference: str) -> list[str]:
    """The distinct content words of a reference, in order (as written there, without punctuation)."""
    words = [re.sub(r"^\W+|\W+$", "", word) for word in reference.split()]
    kept = [w for w in words if len(w) >= 3 and w.isalpha() and w.lower() not in FUNCTION_WORDS]
    return list(dict.fromkeys(kept))


def pick(references: list[str], count: int, seed: int) -> list[Constraints]:
    """Up to ``count`` content words of each reference, drawn with ``seed``."""
    rng = random.Random(seed)
    chosen = []
    for reference in references:
        words = content_words(reference)
        chosen.append(Constraints(tuple(rng.sample(words, min(count, len(words))))))
    return chosen


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", required=True, help="model directory (repeatable)")
    parser.add_argument("--data", type=Path, default=MULTI30K)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="searches per setting; the fastest counts")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sources = read_gz(args.data / "test_2016_flickr.de.gz")[: args.sentences]
    references = read_gz(args.data / "test_2016_flickr.en.gz")[: args.sentences]
    settings = {"none": None, "1 word": pick(references, 1, args.seed), "2 words": pick(references, 2, args.seed)}
    print(f"{len(sources)} sentences, beam {args.beam}, {args.threads} thread(s), fastest of {args.repeats}; {load()}")
    print("| model | constraints | phrases | BLEU | sentences met | phrases met | fallbacks | pieces/sentence | "
          "search s | ms/constraint |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model_dir in args.model:
        translator = Translator.load(model_dir)
        vocab = translator.data.tgt_vocab
        encoded = [translator.encode_line(line).ids for line in sources]
        options = SearchOptions(beam=args.beam, batch_size=64)
        lexical = {name: translator.encode_constraints(constraints) for name, constraints in settings.items()}
        seconds = dict.fromkeys(settings, float("inf"))
        found: dict[str, list] = {}
        for _ in range(args.repeats):  # the settings in turn, so that a burst of load does not hit one of them only
            for name, (constraints, _) in lexical.items():
                started = time.perf_counter()
                found[name] = translator.search_encoded(encoded, options, constraints=constraints)
                seconds[name] = min(seconds[name], time.perf_counter() - started)
        for name, (constraints, warnings) in lexical.items():
            results = found[name]
            warnings = warnings + translator.unmet_warnings(constraints, results)
            bleu = score([hyps[0].text for hyps in results], references, ("bleu",))["bleu"]
            phrases = sum(len(line.include) for line in constraints or [] if line)
            missing = [unmet(vocab.ids(hyps[0].pieces), line.include) if line else [] for hyps, line in
                       zip(results, constraints or [None] * len(results), strict=True)]  # fmt: skip
            sentences_met = sum(1 for m in missing if not m) / len(results)
            phrases_met = 1 - sum(len(m) for m in missing) / phrases if phrases else 1.0
            extra = (seconds[name] - seconds["none"]) * 1000 / phrases if phrases else 0.0
            length = sum(len(hyps[0].pieces) for hyps in results) / len(results)
            print(f"| {Path(model_dir).name} | {name} | {phrases:,} | {bleu:.2f} | {100 * sentences_met:.1f} % | "
                  f"{100 * phrases_met:.1f} % | {len(warnings)} | {length:.1f} | {seconds[name]:.1f} | {extra:.1f} |",
                  flush=True)  # fmt: skip
    print(load())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
