"""Contrastive (targeted) evaluation: does the model score the reference above minimally wrong variants of it?

A suite is a JSON-lines file, one item per line::

    {"source": "Ein Mann steht.", "reference": "A man is standing.", "contrastive": ["A man are standing."],
     "phenomenon": "subject-verb agreement", "distance": 1}

``source``, ``reference`` and ``phenomenon`` are strings, ``contrastive`` a non-empty list of strings, ``distance``
a non-negative integer (the tokens the phenomenon spans, e.g. from the subject's head to its verb) or null; other
keys (an ``id``, notes) are kept but not read. An item is right when the reference's forced-decoding
log-probability (:mod:`adlnmt.analysis.forced`; per token with ``normalize``) is strictly above that of every
contrastive variant. Accuracy is reported overall, per phenomenon and per distance bucket
(:data:`DISTANCE_BUCKETS`), each with a 95 % percentile bootstrap interval over the items of the group.

``evaluate_model("models/t1", "suite.jsonl")`` → the result dict (what ``adlnmt contrastive --json`` writes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adlnmt.analysis.forced import PairScorer
from adlnmt.data.corpus import read_lines
from adlnmt.errors import DataError, UserError
from adlnmt.jsontext import JsonError, LoneSurrogate, parse_json
from adlnmt.memory import check_bootstrap_memory
from adlnmt.store.atomic import write_text_atomic

# (lowest, highest) distance of each bucket; None: no upper end
DISTANCE_BUCKETS: tuple[tuple[int, int | None], ...] = ((0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 6), (7, 9),
                                                        (10, None))  # fmt: skip
CONFIDENCE = 0.95


@dataclass
class SuiteItem:
    """One suite line: a source, its reference, the wrong variants, what they test and over what distance."""

    source: str
    reference: str
    contrastive: list[str]
    phenomenon: str
    distance: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other keys of the line, written back unchanged

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        return {**record.pop("extra"), **record}


def bucket(distance: int | None) -> str:
    """The distance bucket's label: "3", "5-6", "10+", or "none"."""
    if distance is None:
        return "none"
    for low, high in DISTANCE_BUCKETS:
        if distance >= low and (high is None or distance <= high):
            return f"{low}+" if high is None else (str(low) if low == high else f"{low}-{high}")
    raise ValueError(f"negative distance {distance}")


def parse_item(line: str, path: str | Path, number: int) -> SuiteItem:
    """One suite line, or a DataError naming the file, the line and what is wrong."""
    try:
        record = parse_json(line)
    except LoneSurrogate as err:  # a "\udc00" escape: no tokenizer takes it
        raise DataError(str(err), path, number) from None
    except JsonError as err:
        raise DataError(f"invalid JSON ({err})", path, number) from None
    if not isinstance(record, dict):
        raise DataError("expected a JSON object", path, number)
    for key in ("source", "reference", "phenomenon"):
        if not isinstance(record.get(key), str):
            raise DataError(f"'{key}' must be a string", path, number)
    variants = record.get("contrastive")
    if not isinstance(variants, list) or not variants or not all(isinstance(v, str) for v in variants):
        raise DataError("'contrastive' must be a non-empty list of strings", path, number)
    if same := [i for i, variant in enumerate(variants, 1) if variant == record["reference"]]:
        raise DataError(f"contrastive variant {same[0]} is the reference itself (it could never be scored below "
                        "it); drop it or make it differ", path, number)  # fmt: skip
    distance = record.get("distance")
    if distance is not None and (not isinstance(distance, int) or isinstance(distance, bool) or distance < 0):
        raise DataError(f"'distance' must be a non-negative integer or null, not {distance!r}", path, number)
    known = {"source", "reference", "contrastive", "phenomenon", "distance"}
    extra = {key: value for key, value in record.items() if key not in known}
    return SuiteItem(record["source"], record["reference"], variants, record["phenomenon"], distance, extra)


def read_suite(path: str | Path) -> list[SuiteItem]:
    """The items of a suite file (blank lines skipped); DataError for a malformed line or an empty suite."""
    return [item for _, item in numbered_suite(path)]


def numbered_suite(path: str | Path) -> list[tuple[int, SuiteItem]]:
    """:func:`read_suite` with each item's line number in the file (1-based)."""
    items = [(number, parse_item(line, path, number))
             for number, line in enumerate(read_lines(path), start=1) if line.strip()]  # fmt: skip
    if not items:
        raise DataError("the suite has no items", path)
    return items


def write_suite(items: Iterable[SuiteItem], path: str | Path) -> None:
    """Write ``items`` as JSON lines (UTF-8, one per line), atomically."""
    text = "".join(json.dumps(item.to_dict(), ensure_ascii=False) + "\n" for item in items)
    write_text_atomic(path, text)


def bootstrap_interval(correct: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    """The 95 % percentile bootstrap interval of the mean of ``correct`` [n] (resampling items). Every group draws
    from a generator of its own, seeded alike, so that two groups of the same items get the same interval."""
    draws = np.random.default_rng(seed).integers(0, correct.size, size=(resamples, correct.size))
    means = correct[draws].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def summarize(correct: np.ndarray, resamples: int, seed: int) -> dict[str, Any]:
    low, high = bootstrap_interval(correct, resamples, seed)
    return {"items": int(correct.size), "accuracy": float(correct.mean()), "low": low, "high": high}


def accuracy_report(
    items: Sequence[SuiteItem], correct: Sequence[bool], resamples: int = 1000, seed: int = 1
) -> dict[str, Any]:
    """Accuracy of ``correct`` (one per item) overall, by phenomenon and by distance bucket, with intervals."""
    if resamples < 1:
        raise UserError(f"the number of bootstrap resamples must be positive, not {resamples}")
    right = np.asarray(correct, dtype=float)

    def grouped(keys: list[str], order: list[str]) -> dict[str, dict[str, Any]]:
        members = np.asarray(keys)
        return {key: summarize(right[members == key], resamples, seed) for key in order if key in keys}

    phenomena = [item.phenomenon for item in items]
    buckets = [bucket(item.distance) for item in items]
    bucket_order = [bucket(low) for low, _ in DISTANCE_BUCKETS] + ["none"]
    return {
        "overall": summarize(right, resamples, seed),
        "by_phenomenon": grouped(phenomena, sorted(set(phenomena))),
        "by_distance": grouped(buckets, bucket_order),
        "confidence": CONFIDENCE,
        "resamples": resamples,
        "seed": seed,
    }


def evaluate_suite(
    scorer: PairScorer,
    items: Sequence[SuiteItem],
    batch_size: int = 64,
    normalize: bool = False,
    resamples: int = 1000,
    seed: int = 1,
    names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Score every reference and variant of ``items`` with ``scorer`` → :func:`accuracy_report` plus the lists
    ``correct`` (bool) and ``margins`` (reference score − best variant score), one per item. ``names``: each item's
    name in the warnings of a side cut to the model's limits (default ``item N``; :func:`evaluate_model`:
    ``FILE:LINE``)."""
    check_bootstrap_memory(resamples, len(items))  # before the scoring, which may take long
    sources = [item.source for item in items for _ in range(1 + len(item.contrastive))]
    targets = [target for item in items for target in (item.reference, *item.contrastive)]
    names = names or [f"item {number}" for number in range(1, len(items) + 1)]
    where = [(name, f"{name} {'reference' if k == 0 else f'variant {k}'}")
             for name, item in zip(names, items, strict=True) for k in range(1 + len(item.contrastive))]  # fmt: skip
    scores = [score.score(normalize) for score in scorer.score(sources, targets, batch_size, where)]
    margins, start = [], 0
    for item in items:
        end = start + 1 + len(item.contrastive)
        margins.append(scores[start] - max(scores[start + 1 : end]))
        start = end
    correct = [margin > 0 for margin in margins]
    report = accuracy_report(items, correct, resamples, seed)
    return {**report, "normalize": normalize, "correct": correct, "margins": margins}


def check_variants_differ(scorer: PairScorer, numbered: Sequence[tuple[int, SuiteItem]], suite: str | Path) -> None:
    """A DataError naming the suite line of the first variant that the model's target vocabulary reads as the very
    pieces of its reference (it differs only in what the normalisation drops, such as spaces): scored equal, it
    could never be below the reference, as a variant equal to it (:func:`parse_item`)."""
    encode = scorer.translator.data.tgt_vocab.encode_batch
    for number, item in numbered:
        reference, *variants = encode([item.reference, *item.contrastive])
        if same := [k for k, variant in enumerate(variants, 1) if variant == reference]:
            raise DataError(f"contrastive variant {same[0]} reads as the reference's very pieces in this model's "
                            "vocabulary (it could never be scored below it); drop it or make it differ", suite,
                            number)  # fmt: skip


def evaluate_model(
    model_dir: str | Path,
    suite: str | Path,
    checkpoint: str = "best",
    device: str = "cpu",
    batch_size: int = 64,
    normalize: bool = False,
    resamples: int = 1000,
    seed: int = 1,
    engine: str | None = None,
) -> dict[str, Any]:
    """A model directory (or CTranslate2 export) on a suite file: the result of :func:`evaluate_suite` with the
    model and suite paths added (what a grid records per finished run)."""
    numbered = numbered_suite(suite)  # a malformed suite fails before the model loads
    items, names = [item for _, item in numbered], [f"{suite}:{number}" for number, _ in numbered]
    scorer = PairScorer.load(model_dir, checkpoint, device, engine)
    check_variants_differ(scorer, numbered, suite)
    result = evaluate_suite(scorer, items, batch_size, normalize, resamples, seed, names)
    return {**result, "model": str(model_dir), "suite": str(suite)}


def table_cell(text: str) -> str:
    """``text`` as one cell of a Markdown table row: ``|`` escaped, line breaks and other whitespace runs as one
    space."""
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table(result: dict[str, Any]) -> str:
    """The accuracy overall, by phenomenon and by distance as one Markdown table."""
    percent = 100 * result["confidence"]
    lines = [f"| group | items | accuracy | {percent:g} % interval |", "| --- | ---: | ---: | --- |"]

    def row(name: str, entry: dict[str, Any]) -> str:
        return (f"| {name} | {entry['items']} | {100 * entry['accuracy']:.1f} | "
                f"{100 * entry['low']:.1f}–{100 * entry['high']:.1f} |")  # fmt: skip

    lines.append(row("**all**", result["overall"]))
    lines += [row(f"phenomenon: {table_cell(name)}", entry) for name, entry in result["by_phenomenon"].items()]
    lines += [row(f"distance {name}", entry) for name, entry in result["by_distance"].items()]
    return "\n".join(lines) + "\n"
