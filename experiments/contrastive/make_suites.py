"""Regenerate the Multi30k subject-verb agreement suites (suites/*.jsonl) and their sizes (sizes.json).

    python experiments/contrastive/make_suites.py [MULTI30K_DIR]     # default: ../shared/data/multi30k

Deterministic: the same Multi30k files give byte-identical suites. The lexicon of -ing forms is read from the
references and the English training side; each suite line holds the German source.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from adlnmt.analysis.agreement import agreement_suite
from adlnmt.analysis.contrastive import write_suite
from adlnmt.data.corpus import read_lines

TEST_SETS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")
HERE = Path(__file__).resolve().parent


def main(multi30k: Path) -> None:
    lexicon_text = list(read_lines(multi30k / "train.en.gz"))
    sizes = {}
    (HERE / "suites").mkdir(exist_ok=True)
    for name in TEST_SETS:
        sources, references = (list(read_lines(multi30k / f"{name}.{lang}.gz")) for lang in ("de", "en"))
        items = agreement_suite(sources, references, [lexicon_text])
        write_suite(items, HERE / "suites" / f"{name}.agreement.jsonl")
        by_distance = Counter(item.distance for item in items)
        sizes[name] = {"references": len(references), "items": len(items),
                       "by_distance": {str(k): by_distance[k] for k in sorted(by_distance)}}  # fmt: skip
    record = {"generator": "adlnmt.analysis.agreement", "lexicon": "references + train.en", "suites": sizes}
    (HERE / "sizes.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[2] / "shared" / "data" / "multi30k")
