"""Run results for tests: every field a finished run records, with values that the tests change where they matter."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from adlnmt.experiment.results import (
    CodeVersion,
    CurvePoint,
    Evaluation,
    LengthBucket,
    Machine,
    Provenance,
    RunResult,
    SuiteResult,
    Timing,
)

CODE = CodeVersion(git_commit="0" * 40, git_dirty=False, adlnmt="0.1.0")


def machine(device: str = "cpu", capability: str = "AVX2", date: str = "2026-11-25T12:00:00+00:00") -> Machine:
    return Machine(cpu="AMD EPYC", cpu_capability=capability, logical_cores=2, usable_cores=2, torch_threads=1,
                   torch="2.13.0+cpu", device=device, device_name="NVIDIA H200" if device != "cpu" else "AMD EPYC",
                   python="3.11.7", platform="Linux", date=date, load_average=[0.5, 0.5, 0.5])  # fmt: skip


def scored(scores: dict[str, float] | None = None, sentences_per_s: float = 10.0, name: str = "test") -> Evaluation:
    bucket = LengthBucket(label="1+", seconds=1.0, sentences=10, ms_per_sentence=100.0, scores=scores or {})
    timing = Timing(decode_seconds=1.0, sentences_per_s=sentences_per_s, tokens_per_s=10 * sentences_per_s,
                    buckets=[bucket])  # fmt: skip
    return Evaluation(scores=scores or {}, signatures={}, hypotheses=f"hyp/{name}.txt", sentences=10, timing=timing)


def curve(ppls: list[float]) -> list[CurvePoint]:
    """A validation curve: one checkpoint per 100 updates."""
    return [CurvePoint(update=100 * (i + 1), valid_ppl=ppl) for i, ppl in enumerate(ppls)]


def run_result(seed: int = 1, ppls: tuple[float, ...] = (10.0, 11.0, 12.0, 13.0), on: Machine | None = None,
               **changes: Any) -> RunResult:  # fmt: skip
    """A finished run of ``seed`` with the validation curve ``ppls``, evaluated on ``on`` (machine()); ``changes``
    replace any other field."""
    points = curve(list(ppls))
    best = min(points, key=lambda point: point.valid_ppl or 0.0)
    provenance = Provenance(code=CODE, training_sessions=[], adl={}, precision="fp32", machine=on or machine(),
                            train_minutes=1.0, paused_minutes=0.0, timed_alone=True, evaluate_minutes=1.0)  # fmt: skip
    result = RunResult(
        fingerprint="f" * 16, experiment="tiny", scale="cpu", variant="a", seed=seed, parameters=1000,
        canonical={}, updates=points[-1].update, epochs=1, train_minutes=1.0, train_tokens_per_s=100.0,
        best_update=best.update, best_valid_ppl=best.valid_ppl or 0.0, best_valid_bleu=None, checkpoint="best",
        averaged=[], device="cpu", threads=1, curve=points, tests={"test": scored()}, provenance=provenance,
    )  # fmt: skip
    return replace(result, **changes)


def suite(correct: list[bool]) -> SuiteResult:
    return SuiteResult(overall={}, by_phenomenon={}, by_distance={}, normalize=False, correct=correct)
