"""The record of a finished run, ``result.json``: written by the worker (and again by ``--retime``), read by the
report, the plots, the claims and the archive. This module is the only one that knows its keys.

The committed archives (``experiments/results/*/runs``) load as they were written and save to the same text: each
dataclass lists its keys in the order the worker writes them, a part that holds another's keys at its own level
(the code version inside the provenance) is marked ``FLAT``, and a field whose value is its default (a key older
results lack, or one only some runs have) is left out.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from adlnmt.errors import UserError
from adlnmt.jsontext import JsonError, parse_json
from adlnmt.train.checkpoint import atomic_write

RESULT_FILE = "result.json"
FLAT = {"flat": True}  # the part's keys sit beside its owner's, not under its name
# the JSON values a field of each type takes (a bool is an int to Python, never in a result)
SCALARS: dict[type, tuple[type, ...]] = {str: (str,), bool: (bool,), int: (int,), float: (int, float)}

Part = TypeVar("Part", bound="Record")


class ResultError(UserError):
    """A ``result.json`` that cannot be read as a run's result."""


class Record:
    """A part of a result: its JSON object and back."""

    @classmethod
    def from_dict(cls: type[Part], value: Any) -> Part:
        """The part in the JSON object ``value``; ValueError naming the first key that is missing or unknown."""
        return _build(cls, value, "")

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True, kw_only=True)
class CodeVersion(Record):
    """The git commit of the code that ran (None outside a clone), whether tracked files differed, the version."""

    git_commit: str | None
    git_dirty: bool | None
    adlnmt: str


@dataclass(frozen=True, kw_only=True)
class Machine(Record):
    """The machine a run was evaluated or timed on: :func:`adlnmt.bench.machine.machine_record`."""

    cpu: str
    cpu_capability: str  # torch's: AVX2, AVX512, ...
    logical_cores: int
    usable_cores: int
    torch_threads: int
    torch: str
    device: str  # cpu, cuda:0, ...
    device_name: str  # the GPU's name, or the CPU's
    python: str
    platform: str
    date: str  # when the evaluation (or --retime) started, ISO 8601 UTC
    load_average: list[float] | None  # 1, 5 and 15 minutes, at that moment

    @classmethod
    def here(cls, device: str) -> Machine:
        """The record of this machine, for ``device``, now."""
        import torch

        from adlnmt.bench.machine import machine_record

        return cls.from_dict(machine_record(torch.device(device)))

    @property
    def kind(self) -> str:
        """'CPU', or the GPU's name: a CPU's times and a GPU's do not average."""
        return "CPU" if self.device == "cpu" else self.device_name

    @property
    def processor(self) -> str:
        """The processor that timed a decoding: the GPU's name, or the CPU's with its instruction set."""
        return self.kind if self.device != "cpu" else f"{self.cpu} ({self.cpu_capability})"


@dataclass(frozen=True, kw_only=True)
class TrainingSession(Record):
    """One start or resumption of the run's training."""

    started: str
    code: CodeVersion = field(metadata=FLAT)


@dataclass(frozen=True, kw_only=True)
class LengthBucket(Record):
    """The sentences of one source-length bucket of a test set: decoding time and scores."""

    label: str  # "1-7", ..., "17+" (source words)
    seconds: float
    sentences: int
    ms_per_sentence: float | None  # None for an empty bucket
    scores: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class Timing(Record):
    """The decoding speed of one test set (what ``--retime`` measures again)."""

    decode_seconds: float
    sentences_per_s: float | None
    tokens_per_s: float | None  # target pieces + EOS
    buckets: list[LengthBucket]
    # cores that other processes kept busy meanwhile (adlnmt.bench.machine.BusyBeside): a speed to compare only
    # near 0; None where not measured (timings before 2026-11-27, or a system without /proc/stat)
    busy_beside: float | None = None


@dataclass(frozen=True, kw_only=True)
class Evaluation(Record):
    """One test set: corpus scores with their sacreBLEU signatures, the hypotheses' file and the timing."""

    scores: dict[str, float]
    signatures: dict[str, str]
    hypotheses: str  # relative to the folder that holds result.json
    sentences: int
    timing: Timing = field(metadata=FLAT)


@dataclass(frozen=True, kw_only=True)
class SuiteResult(Record):
    """Accuracy on one contrastive suite (:mod:`adlnmt.analysis.contrastive`) and each item's outcome."""

    overall: dict[str, Any]
    by_phenomenon: dict[str, dict[str, Any]]
    by_distance: dict[str, dict[str, Any]]
    normalize: bool
    correct: list[bool]


@dataclass(frozen=True, kw_only=True)
class CurvePoint(Record):
    """One checkpoint record of the training (metrics.jsonl); a value the trainer did not record is None."""

    update: int
    epoch: int | None = None
    train_loss: float | None = None
    valid_ppl: float | None = None
    valid_bleu: float | None = None
    train_minutes: float | None = None
    tokens_per_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class Distillation(Record):
    """The distilled data a student trained on, by content (:func:`adlnmt.distill.kd.distillation_identity`)."""

    teacher_sha256: list[str]  # each teacher member's weights (or an export's manifest)
    translations_sha256: str  # over every training target file's SHA-256


@dataclass(frozen=True, kw_only=True)
class Provenance(Record):
    """Where and how the run was trained and evaluated. Keys left out: not recorded when the run finished
    (``training_sessions`` and ``paused_minutes`` since 2026-11-23, ``tf32_allowed`` and ``timed_alone`` since
    2026-11-26, ``weights_sha256`` and ``distillation`` since 2026-11-29, ``weights_digest`` since 2026-12-02), or not
    of this run (``distillation``: a run on references)."""

    code: CodeVersion = field(metadata=FLAT)
    training_sessions: list[TrainingSession] | None = None
    adl: dict[str, str]
    precision: str
    tf32_allowed: dict[str, bool] | None = None  # matmul, cudnn: False for fp32 (train.device.full_fp32)
    machine: Machine  # when evaluation started
    train_minutes: float
    paused_minutes: float | None = None  # stopped while another run decoded, not in train_minutes
    timed_alone: bool | None = None  # False: decoded beside other runs' training (--decode-beside-training)
    evaluate_minutes: float
    weights_sha256: str | None = None  # of the checkpoint evaluated (``checkpoint``)
    weights_digest: str | None = None  # of its tensors alone (:func:`adlnmt.store.weights_digest`)
    distillation: Distillation | None = None  # a student's: the teacher's translations it trained on


@dataclass(frozen=True, kw_only=True)
class Rerun(Record):
    """The archived result an ``adlnmt experiment --rerun`` replaced with this one, and whether this one reproduced
    it (:func:`adlnmt.experiment.reproduce.compare`)."""

    replaced_machine: Machine  # where the replaced result was evaluated
    replaced_code: CodeVersion
    replaced_weights_sha256: str | None
    replaced_weights_digest: str | None = None  # since 2026-12-02
    reproduced: bool  # the same training: the same weights, else the same training loss at every checkpoint
    same_hypotheses: bool  # every hypothesis of the test sets both translated the same
    comparison: str  # what compare says: "reproduced: …" or "not reproduced: …"


@dataclass(frozen=True, kw_only=True)
class FirstTiming(Record):
    """The speed figures a run finished with, kept when ``--retime`` replaces them."""

    machine: Machine
    tests: dict[str, Timing]


@dataclass(frozen=True, kw_only=True)
class Retimed(Record):
    """The last ``--retime`` of the run: its machine and code, and the first timing."""

    machine: Machine
    code: CodeVersion = field(metadata=FLAT)
    before: FirstTiming


@dataclass(frozen=True, kw_only=True)
class ScoredLater(Record):
    """Test sets and metrics of ``added_evaluation`` that the run was scored on after it had finished
    (``--score-added``): the test sets translated with its weights, once they had translated ``checked_on`` (an
    archived test set) to its archived hypotheses again; the metrics computed from the archived hypotheses."""

    tests: list[str]
    metrics: list[str]
    checked_on: str | None  # None: no test set translated, only metrics added
    machine: Machine
    code: CodeVersion = field(metadata=FLAT)


@dataclass(frozen=True, kw_only=True)
class RunResult(Record):
    """A finished run: what it is, its training summary and curve, each test set's scores and speed, provenance."""

    fingerprint: str
    experiment: str
    scale: str | None
    variant: str
    seed: int
    parameters: int
    canonical: dict[str, str]  # the ADL of encoder and decoder
    updates: int
    epochs: int
    train_minutes: float  # without the minutes the run was paused
    train_tokens_per_s: float
    best_update: int
    best_valid_ppl: float
    best_valid_bleu: float | None
    checkpoint: str  # "best", "last" or "averaged"
    averaged: list[str]  # the checkpoint files averaged
    device: str
    threads: int
    curve: list[CurvePoint]
    tests: dict[str, Evaluation]
    contrastive: dict[str, SuiteResult] = field(default_factory=dict)
    provenance: Provenance
    scored_later: list[ScoredLater] = field(default_factory=list)  # one record per --score-added that added some
    retimed: Retimed | None = None
    rerun: Rerun | None = None  # the result this one replaced (--rerun), since 2026-11-29
    shared_from: str | None = None  # the archived run of another experiment this one was copied from

    @classmethod
    def load(cls, path: Path) -> RunResult:
        """The result stored in ``path``: FileNotFoundError when there is none, ResultError when it is damaged."""
        try:
            value = parse_json(path.read_bytes())
        except FileNotFoundError:
            raise
        except JsonError as err:
            raise ResultError(f"{path}: unreadable (invalid JSON: {err})") from err
        except OSError as err:
            raise ResultError(f"{path}: unreadable ({type(err).__name__})") from err
        try:
            return cls.from_dict(value)
        except ValueError as err:
            raise ResultError(f"{path}: not a run's result ({err})") from err

    def save(self, path: Path) -> None:
        """Write ``path`` atomically (a reader never sees half a result), in the archive's format."""
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"
        atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))

    def score(self, test: str, metric: str) -> float | None:
        """The corpus score on ``test``; None when the run was not evaluated on it (or not with ``metric``)."""
        found = self.tests.get(test)
        return found.scores.get(metric) if found else None

    def hypotheses(self, folder: Path, test: str) -> Path | None:
        """The file of the run's hypotheses on ``test`` (``folder``: the one holding this result.json); None when the
        run was not evaluated on it."""
        found = self.tests.get(test)
        return folder / found.hypotheses if found else None

    def timing(self, test: str) -> Timing | None:
        found = self.tests.get(test)
        return found.timing if found else None

    def machine(self, timed: bool = False) -> Machine:
        """The machine the run trained and was evaluated on, or (``timed``) the one its decoding speed was last
        measured on (``--retime``, else the same)."""
        return self.retimed.machine if timed and self.retimed else self.provenance.machine

    @property
    def evaluated(self) -> datetime:
        """When the run's evaluation started (its result existed from then on)."""
        return datetime.fromisoformat(self.provenance.machine.date)

    def with_added(self, tests: dict[str, Evaluation], later: ScoredLater) -> RunResult:
        """This result with test sets (or metrics) added or replaced by ``tests``, and ``later`` recorded."""
        return replace(self, tests={**self.tests, **tests}, scored_later=[*self.scored_later, later])

    def with_timings(self, timings: dict[str, Timing], retimed: Retimed) -> RunResult:
        """This result with the speed of each test set in ``timings`` replaced (``--retime``)."""
        tests = {name: replace(test, timing=timings.get(name, test.timing)) for name, test in self.tests.items()}
        return replace(self, tests=tests, retimed=retimed)


def read_result(path: Path) -> RunResult | None:
    """The result in ``path``; None when there is none or it is damaged (the run counts as not finished, and
    :func:`adlnmt.experiment.checks.unreadable_results` lists it)."""
    try:
        return RunResult.load(path)
    except (FileNotFoundError, ResultError):
        return None


# --- JSON ↔ dataclasses ----------------------------------------------------------------------------------------


def _build(cls: type[Part], value: Any, where: str) -> Part:
    """An instance of the dataclass ``cls`` from the JSON object ``value`` (``where``: its place, for errors)."""
    if not isinstance(value, dict):
        raise ValueError(f"{where!r} is not an object" if where else "not a JSON object")
    found, known = _take(cls, value, where)
    if unknown := sorted(set(value) - known):
        raise ValueError(f"unknown key {_key(where, unknown[0])!r}")
    return found


def _take(cls: type[Part], value: dict[str, Any], where: str) -> tuple[Part, set[str]]:
    """The instance of ``cls`` in ``value`` and the keys it took (a FLAT part's among them)."""
    hints = typing.get_type_hints(cls)
    known: set[str] = set()
    arguments = {}
    for part in fields(cls):  # type: ignore[arg-type]
        if part.metadata.get("flat"):
            arguments[part.name], taken = _take(hints[part.name], value, where)
            known |= taken
            continue
        known.add(part.name)
        if part.name in value:
            arguments[part.name] = _convert(hints[part.name], value[part.name], _key(where, part.name))
        elif part.default is MISSING and part.default_factory is MISSING:
            raise ValueError(f"no {_key(where, part.name)!r}")
    return cls(**arguments), known


def _convert(hint: Any, value: Any, where: str) -> Any:
    """``value`` as the type ``hint`` says: dataclasses built, lists and dicts of them converted, the rest as is."""
    if is_dataclass(hint):
        return _build(hint, value, where)
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType:  # X | None
        return None if value is None else _convert(next(a for a in arguments if a is not type(None)), value, where)
    if origin is list and isinstance(value, list):
        return [_convert(arguments[0], item, f"{where}[{i}]") for i, item in enumerate(value)]
    if origin is dict and isinstance(value, dict):
        return {key: _convert(arguments[1], item, _key(where, key)) for key, item in value.items()}
    if origin in (list, dict):
        raise ValueError(f"{where!r} is not {'a list' if origin is list else 'an object'}")
    if hint in SCALARS and not (isinstance(value, bool) == (hint is bool) and isinstance(value, SCALARS[hint])):
        raise ValueError(f"{where!r} is not a{'n' if hint is int else ''} {hint.__name__}: {value!r}")
    return value


def _key(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _plain(value: Any) -> Any:
    """The JSON value of ``value``: dataclasses as objects in field order, a field left out at its default."""
    if is_dataclass(value):
        found: dict[str, Any] = {}
        for part in fields(value):
            item = getattr(value, part.name)
            if part.metadata.get("flat"):
                found.update(_plain(item))
            elif not _is_default(part, item):
                found[part.name] = _plain(item)
        return found
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _is_default(part: Any, value: Any) -> bool:
    if part.default is not MISSING:
        return value == part.default
    return part.default_factory is not MISSING and value == part.default_factory()
