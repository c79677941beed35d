"""Translation metrics on detokenised text: sacreBLEU's BLEU, chrF and TER (with their signatures), the mean of
add-1 smoothed sentence BLEU (the metric of COMET (Wang) §4.3), METEOR through NLTK (exact + Porter-stem
matching only: WordNet data is never downloaded), and sacreBLEU's paired bootstrap test between two systems.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import sacrebleu
from sacrebleu.metrics.base import Metric, Score, Signature
from sacrebleu.significance import PairedTest
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from sacrebleu.utils import sum_of_lists

from adlnmt.data import corpus
from adlnmt.errors import DataError, UserError
from adlnmt.memory import check_bootstrap_memory

METRICS = ("bleu", "chrf", "ter", "meteor", "sentbleu")
LABELS = {
    "bleu": "BLEU (sacreBLEU corpus BLEU)",
    "chrf": "chrF (sacreBLEU chrF2)",
    "ter": "TER (sacreBLEU; lower is better)",
    "meteor": "METEOR (NLTK, exact+stem matching; WordNet synonyms not available offline)",
    "sentbleu": "sentBLEU (mean of add-1 smoothed sentence BLEU, COMET (Wang) §4.3)",
}
LOWER_IS_BETTER = frozenset({"ter"})
METEOR_PARAMS = {"alpha": 0.9, "beta": 3.0, "gamma": 0.5}  # NLTK's defaults (Lavie & Agarwal 2007)


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 (or gzip) text file, located errors for bad input (see ``adlnmt.data.corpus``)."""
    return list(corpus.read_lines(path))


def parse_metrics(metrics: str | Sequence[str]) -> tuple[str, ...]:
    """Metric names from ``"bleu,chrf"`` or a sequence, checked against METRICS, duplicates dropped."""
    names = metrics.split(",") if isinstance(metrics, str) else list(metrics)
    names = [name.strip().lower() for name in names if name.strip()]
    unknown = [name for name in names if name not in METRICS]
    if unknown or not names:
        problem = f"unknown metric {unknown[0]!r}" if unknown else "no metric given"
        raise UserError(f"{problem}; choose from {', '.join(METRICS)}")
    return tuple(dict.fromkeys(names))


# --- sentence-level metrics ----------------------------------------------------------------------


@cache
def _sentence_bleu_metric() -> sacrebleu.metrics.BLEU:
    # 'add-k' with k=1 adds 1 to the matched and to the total n-gram counts of orders n >= 2 only
    # (sacrebleu/metrics/bleu.py, compute_bleu) = Lin & Och (2004), "method 2" of Chen & Cherry (2014).
    # With add-k no order ever has 0 counts, so effective_order does not change the score; it only silences
    # sacreBLEU's sentence-level warning.
    return sacrebleu.metrics.BLEU(smooth_method="add-k", smooth_value=1, effective_order=True)


def sentence_bleu(hypothesis: str, reference: str) -> float:
    """Add-1 smoothed (Lin & Och 2004) sentence BLEU in [0, 100], 13a tokenisation, case-sensitive."""
    return _sentence_bleu_metric().sentence_score(hypothesis, [reference]).score


class _NoWordNet:
    """Stand-in for ``nltk.corpus.wordnet``: no synsets, so METEOR's synonym stage matches nothing."""

    def synsets(self, lemma: str, *args: Any, **kwargs: Any) -> list:
        return []


@cache
def _meteor_parts() -> tuple[Callable[..., float], Any, Tokenizer13a]:
    try:
        from nltk.stem.porter import PorterStemmer
        from nltk.translate.meteor_score import meteor_score
    except ImportError:
        raise UserError("METEOR needs NLTK (pip install 'nltk>=3.8')") from None
    return meteor_score, PorterStemmer(), Tokenizer13a()


def sentence_meteor(hypothesis: str, reference: str) -> float:
    """NLTK METEOR ×100 with exact and Porter-stem matching (no WordNet), 13a tokens, lowercased by NLTK."""
    meteor_score, stemmer, tokenize = _meteor_parts()
    hyp, ref = tokenize(hypothesis.strip()).split(), tokenize(reference.strip()).split()
    return 100.0 * meteor_score([ref], hyp, stemmer=stemmer, wordnet=_NoWordNet(), **METEOR_PARAMS)


class _SentenceMeanSignature(Signature):
    def __init__(self, args: dict) -> None:
        super().__init__(args)
        self._abbr.update({key: key for key in args["extra"]})
        self.info.update(args["extra"])


class SentenceMean(Metric):
    """A sacreBLEU ``Metric`` whose corpus score is the mean of sentence scores, so that sacreBLEU's paired
    tests resample it like its own metrics (segment statistics: [score, 1])."""

    _SIGNATURE_TYPE = _SentenceMeanSignature

    def __init__(self, name: str, sentence_score: Callable[[str, str], float], extra: dict[str, str]) -> None:
        super().__init__()
        self.name = name
        self.sentence_score_fn = sentence_score
        self.extra = extra

    def _preprocess_segment(self, sent: str) -> str:
        return sent  # the sentence metric tokenises itself

    def _extract_reference_info(self, refs: Sequence[str]) -> dict[str, Any]:
        return {"refs": list(refs)}

    def _compute_segment_statistics(self, hypothesis: str, ref_kwargs: dict) -> list[float]:
        return [max(self.sentence_score_fn(hypothesis, ref) for ref in ref_kwargs["refs"]), 1.0]

    def _compute_score_from_stats(self, stats: Sequence[float]) -> Score:
        return Score(self.name, float(stats[0]) / float(stats[1]) if stats[1] else 0.0)

    def _aggregate_and_compute(self, stats: list[list[float]]) -> Score:
        return self._compute_score_from_stats(sum_of_lists(stats))


def _make_metric(name: str) -> Metric:
    if name == "bleu":
        return sacrebleu.metrics.BLEU()
    if name == "chrf":
        return sacrebleu.metrics.CHRF()
    if name == "ter":
        return sacrebleu.metrics.TER()
    if name == "sentbleu":
        bleu = _sentence_bleu_metric()
        extra = {"case": "mixed", "tok": bleu.tokenizer.signature(), "smooth": "add-k[1.00]", "agg": "mean"}
        return SentenceMean("sentBLEU", sentence_bleu, extra)
    _meteor_parts()  # a clear error if NLTK is missing
    import nltk

    extra = {"impl": f"nltk-{nltk.__version__}", "tok": "13a", "case": "lc", "match": "exact+stem"}
    extra.update({key: str(value) for key, value in METEOR_PARAMS.items()})
    extra["agg"] = "mean-x100"
    return SentenceMean("METEOR", sentence_meteor, extra)


def segment_statistics(name: str, hypotheses: Sequence[str], references: Sequence[str], hyp_name: str = "hypotheses",
                       ref_name: str = "references") -> list[list[float]]:  # fmt: skip
    """Each sentence's sufficient statistics of metric ``name`` as sacreBLEU computes them for its own tests (for
    METEOR and sentBLEU: [sentence score, 1]); a corpus score is a function of their sum. The names are the
    files' in the error when the two differ in length."""
    name = parse_metrics([name])[0]
    _check_aligned(hypotheses, references, hyp_name, ref_name)
    if name == "sentbleu":  # sacreBLEU's sentence score from BLEU's statistics: the same 13a n-grams, counted once
        smoothed = _sentence_bleu_metric()
        return [[smoothed._compute_score_from_stats(list(stats)).score, 1.0]
                for stats in segment_statistics("bleu", hypotheses, references)]  # fmt: skip
    return _metric_with_references(name, tuple(references))._extract_corpus_statistics(list(hypotheses), None)


@lru_cache(maxsize=8)
def _metric_with_references(name: str, references: tuple[str, ...]) -> Metric:
    """A metric with its references processed once, for the statistics of many systems' hypotheses."""
    metric = _make_metric(name)
    metric._ref_cache = metric._cache_references([list(references)])
    return metric


def _check_aligned(hypotheses: Sequence[str], references: Sequence[str], hyp_name: str, ref_name: str) -> None:
    """A DataError naming the files unless they have as many lines and the references hold some text (blank
    hypotheses are a system's output, scored)."""
    if len(hypotheses) != len(references):
        raise DataError(
            f"{hyp_name} has {len(hypotheses)} lines but {ref_name} has {len(references)}; they must be aligned"
        )
    if not references:
        raise DataError(f"{hyp_name} and {ref_name} are empty; nothing to score")
    if not any(line.strip() for line in references):  # sacreBLEU scores it in silence (BLEU 0, TER 0)
        raise DataError(f"every one of its {len(references):,} lines is blank: no reference to score against", ref_name)


# --- corpus scores and the paired test -----------------------------------------------------------


def score(
    hypotheses: Sequence[str],
    references: Sequence[str],
    metrics: str | Sequence[str] = ("bleu", "chrf"),
    hyp_name: str = "hyp",
    ref_name: str = "ref",
) -> dict[str, Any]:
    """Corpus scores: ``{m: value, m + "_label": label, m + "_signature": signature}`` for each metric m.

    meteor and sentbleu are means of sentence scores (×100 for METEOR); TER is lower-is-better.
    """
    names = parse_metrics(metrics)
    _check_aligned(hypotheses, references, hyp_name, ref_name)
    result: dict[str, Any] = {}
    for name in names:
        metric = _make_metric(name)
        result[name] = metric.corpus_score(list(hypotheses), [list(references)]).score
        result[f"{name}_label"] = LABELS[name]
        result[f"{name}_signature"] = str(metric.get_signature())
    return result


@contextlib.contextmanager
def _sacrebleu_seed(seed: int) -> Iterator[None]:
    # PairedTest reads its seed (for the baseline's CI too) from SACREBLEU_SEED; not thread-safe
    previous = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = previous


def paired_bootstrap(
    hyp_a: Sequence[str],
    hyp_b: Sequence[str],
    references: Sequence[str],
    metrics: str | Sequence[str] = ("bleu", "chrf"),
    resamples: int = 1000,
    seed: int = 12345,
    names: tuple[str, str] = ("hyp", "hyp2"),
    ref_name: str = "ref",
) -> dict[str, Any]:
    """sacreBLEU's paired bootstrap resampling (``PairedTest(test_type="bs")``), A the baseline, B the system.

    Per metric: each system's score, bootstrap mean and 95% CI half-width (as sacreBLEU gives them), the
    difference B − A, sacreBLEU's p-value and which system is better. sacreBLEU's p is the share of resamples whose
    absolute difference, less the mean absolute difference over the resamples, reaches the observed |B − A|: the
    resampled |Δ| are centred on their own mean, not on Δ, so it is not the two-sided test of B = A and behaves
    as a one-sided one. The experiment reports use :mod:`adlnmt.verdicts.statistics` (centred, two-sided, over
    seeds and sentences) instead.
    """
    names_checked = parse_metrics(metrics)
    _check_aligned(hyp_a, references, names[0], ref_name)
    _check_aligned(hyp_b, references, names[1], ref_name)
    if resamples < 1:
        raise UserError(f"the number of bootstrap resamples must be positive, not {resamples}")
    if seed <= 0:
        raise UserError(f"the bootstrap seed must be a positive integer (sacreBLEU treats 0 as unseeded), not {seed}")
    metric_objects = {name: _make_metric(name) for name in names_checked}
    widths = [
        len(metric._extract_corpus_statistics(hyp_a[:1], [references[:1]])[0]) for metric in metric_objects.values()
    ]
    check_bootstrap_memory(resamples, len(references), max(widths))  # sacreBLEU picks each metric's statistics
    with _sacrebleu_seed(seed):
        test = PairedTest(
            [(names[0], list(hyp_a)), (names[1], list(hyp_b))],
            metric_objects,
            [list(references)],
            test_type="bs",
            n_samples=resamples,
        )
        signatures, table = test()
    # the table's metric columns (after "System") follow the order of the metrics given
    columns = [key for key in table if key != "System"]
    out: dict[str, Any] = {"test": "paired bootstrap resampling (sacreBLEU)", "resamples": resamples, "seed": seed}
    out.update({"systems": tuple(names), "reference": ref_name, "metrics": {}})
    for name, column in zip(names_checked, columns, strict=True):
        a, b = table[column]
        difference = b.score - a.score
        sign = -1.0 if name in LOWER_IS_BETTER else 1.0
        better = "tie" if difference == 0 else ("b" if sign * difference > 0 else "a")
        out["metrics"][name] = {
            "label": LABELS[name],
            "signature": str(signatures[column]),
            "a": {"score": a.score, "mean": float(a.mean), "ci": float(a.ci)},
            "b": {"score": b.score, "mean": float(b.mean), "ci": float(b.ci)},
            "difference": difference,
            "p_value": float(b.p_value),
            "better": better,
        }
    return out


def _number(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.2f}"


def format_report(result: dict[str, Any]) -> str:
    """Human-readable lines for the result of ``score`` or ``paired_bootstrap``."""
    if "metrics" not in result:
        lines = []
        for name in METRICS:
            if name in result:
                signature = result.get(f"{name}_signature")
                lines.append(f"{LABELS[name]}: {_number(result[name])}" + (f"  [{signature}]" if signature else ""))
        return "\n".join(lines)
    a_name, b_name = result["systems"]
    lines = [
        f"{result['test']}: {result['resamples']} resamples, seed {result['seed']}; "
        f"A = {a_name} (baseline), B = {b_name}, reference {result['reference']}",
        "scores are followed by the bootstrap mean ± the 95% CI half-width; p is sacreBLEU's: the share of resamples "
        "whose |B − A|, less its mean over the resamples, reaches the observed |B − A| (one-sided in effect)",
    ]
    for entry in result["metrics"].values():
        a, b = entry["a"], entry["b"]
        higher = {"a": "A", "b": "B"}.get(entry["better"])
        if higher is None:
            verdict = "tie"
        elif entry["p_value"] < 0.05:
            verdict = f"{higher} is better (significant at p < 0.05)"
        else:
            verdict = f"{higher} scores higher, not significantly (p >= 0.05): no winner"
        lines += [
            f"{entry['label']}  [{entry['signature']}]",
            f"  A {_number(a['score'])} ({_number(a['mean'])} ± {_number(a['ci'])})",
            f"  B {_number(b['score'])} ({_number(b['mean'])} ± {_number(b['ci'])})",
            f"  B − A {entry['difference']:+.2f}, p = {entry['p_value']:.4f}: {verdict}",
        ]
    return "\n".join(lines)
