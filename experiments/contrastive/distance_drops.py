"""Agreement over distance for models scored with ``adlnmt contrastive --json`` (outside a grid): the table a grid
report gives (:func:`adlnmt.experiment.contrastive.drop_lines`), from each model's JSON files of the three Multi30k
suites, pooled.

    python experiments/contrastive/distance_drops.py --baseline NAME NAME=DIR [NAME=DIR ...]

DIR holds ``TEST.json`` for every test set of ``make_suites.py`` (e.g. ``multi30k/aan-table2-transformer-seed3``);
one model per NAME (one seed: its interval holds the items' variation only).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from adlnmt.analysis.contrastive import read_suite
from adlnmt.experiment.contrastive import drop_lines

HERE = Path(__file__).resolve().parent
TEST_SETS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", metavar="NAME=DIR")
    parser.add_argument("--baseline", required=True, help="the NAME the others are compared with")
    args = parser.parse_args()
    distances = [
        item.distance for name in TEST_SETS for item in read_suite(HERE / "suites" / f"{name}.agreement.jsonl")
    ]
    pooled = {}
    for spec in args.models:
        name, _, folder = spec.partition("=")
        outcomes = [
            json.loads((Path(folder) / f"{test}.json").read_text(encoding="utf-8"))["correct"] for test in TEST_SETS
        ]
        pooled[name] = np.asarray([np.concatenate(outcomes)], dtype=float)
        if pooled[name].shape[1] != len(distances):
            parser.error(f"{folder}: {pooled[name].shape[1]} outcomes for {len(distances)} suite items")
    print("\n".join(drop_lines(distances, pooled, args.baseline)))


if __name__ == "__main__":
    main()
