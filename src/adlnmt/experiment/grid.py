"""Grid files of ``adlnmt experiment``: load one YAML file, validate every key (errors name the file and the key
path, e.g. ``grid.yaml: variants[2] ('RNN/RNN').train.d_modle: unknown training option``) and resolve one scale.

A grid names the data (a prepared directory, or raw files the experiment prepares once), shared training options,
the variants (a preset or an encoder/decoder ADL pair, with overrides; or, starting from a pretrained model,
``train.init_from``, its own architecture or one changed), the seeds, the test sets, the metrics and
the decoding options; ``scales`` hold named sets of overrides (``small`` for a CPU, ``full`` for the papers' sizes).
Paths are relative to the grid file; ``~`` and ``$VARS`` are expanded. docs/experiments.md documents the format.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from adlnmt.adl.errors import ADLError
from adlnmt.data.options import MODEL_TYPES, PREPARE_DEFAULTS, PrepareOptions
from adlnmt.data.vocab_from import MODEL_VOCAB_DIR
from adlnmt.errors import DataError, UserError
from adlnmt.experiment import distill_step
from adlnmt.experiment.distill_step import DistillStep
from adlnmt.experiment.results import RunResult
from adlnmt.experiment.schema import Reader, read_yaml
from adlnmt.experiment.speed_spec import SpeedSpec, parse_speed
from adlnmt.flags import bounds_of, flagged, kind_of
from adlnmt.inference.options import SearchOptions
from adlnmt.metrics import parse_metrics
from adlnmt.train.config import TrainConfig, build_config
from adlnmt.verdicts.claims import POOL, Claim, registration_of
from adlnmt.verdicts.statistics import KINDS, RESAMPLES

TOP_KEYS = ("name", "description", "data", "test", "metrics", "seeds", "train", "translate", "length_buckets",
            "baseline", "bootstrap_resamples", "scales", "default_scale", "variants", "claims",
            "added_evaluation", "slurm", "contrastive", "distill", "speed")  # fmt: skip
ADDED_KEYS = ("since", "test", "metrics")
CLAIM_KEYS = ("quote", "where", *KINDS, "margin", "ratio", "metric", "test", "min_source_words", "max_source_words",
              "out_of_scope", "registered", "own_test_only")  # fmt: skip
# claim keys that only some kinds read: refused on the others rather than ignored
KIND_KEYS = {"margin": ("close", "equivalent"), "ratio": ("faster",),
             **dict.fromkeys(("metric", "min_source_words", "max_source_words"),
                             ("better", "close", "equivalent", "larger_gain"))}  # fmt: skip
# claim metrics measured once per run, not per test set: their value in a run's result
RUN_METRICS: dict[str, Callable[[RunResult], float]] = {"valid_ppl": lambda result: result.best_valid_ppl}
SCALE_KEYS = ("description", "data", "train", "translate", "seeds", "repeat_scale", "earlier_max_updates", "variants")
VARIANT_KEYS = ("name", "preset", "encoder", "decoder", "data", "train", "scales", "paper", "distilled")
PATH_KEYS = ("train_src", "train_tgt", "valid_src", "valid_tgt")
VOCAB_FROM = "vocab_from"  # data: a model directory whose sentencepiece models encode the data (adlnmt prepare)
VOCAB_OPTIONS = ("vocab_size", "joint", "model_type")  # the vocabulary vocab_from's model brings
PREPARE_OPTIONS = {f.name: kind_of(f) for f in fields(PrepareOptions)}
GRID_SEARCH = ("beam", "batch_size", "length_penalty", "max_len_ratio")  # the SearchOptions a grid's translate sets
SEARCH_FIELDS = {f.name: f for f in flagged(SearchOptions) if f.name in GRID_SEARCH}
TRANSLATE_OPTIONS = {**{name: kind_of(f) for name, f in SEARCH_FIELDS.items()}, "checkpoint": str, "average": dict}
TRANSLATE_DEFAULTS = {**{name: f.default for name, f in SEARCH_FIELDS.items()}, "checkpoint": "best"}
# Training options the experiment sets itself, and those that belong to a variant.
CONTROLLED = {
    "data": "the grid's 'data'",
    "model": "the run directory",
    "seed": "'seeds'",
    "progress": "the runner",
    "device": "--device of adlnmt experiment",
    "threads": "--threads of adlnmt experiment",
}
MODEL_KEYS = ("preset", "encoder", "decoder")
FOLDER_OPTIONS = {"tensorboard": ("auto", "off")}  # training options that name a folder, but for these values
TRAIN_FIELDS = {f.name: f for f in fields(TrainConfig)}
NAME = re.compile(r"(?!\.+$)[A-Za-z0-9._-]+")  # not dots alone: a grid named ".." would write into results/..


@dataclass(frozen=True)
class DataSpec:
    """Where a variant's training data comes from: an existing prepared directory, or ``prepare`` arguments; or, with
    ``distill``, a teacher's translations of the training source of its data (prepared from the same arguments)."""

    key: str  # directory name under <out>/data (the path of an existing prepared directory)
    prepared: Path | None = None
    prepare: tuple[tuple[str, Any], ...] = ()  # sorted (name, value) pairs: prepare()'s arguments
    distill: DistillStep | None = None  # the grid's distillation step, for its students (experiment.distill_step)

    def arguments(self) -> dict[str, Any]:
        return dict(self.prepare)


@dataclass(frozen=True)
class TestSet:
    name: str
    src: Path
    ref: Path


@dataclass(frozen=True)
class ContrastiveSuite:
    """A contrastive suite every run is scored on after its test sets (adlnmt.analysis.contrastive)."""

    name: str
    suite: Path
    normalize: bool = False


@dataclass(frozen=True)
class Variant:
    name: str  # the row label, e.g. "self-att/RNN"
    slug: str  # its directory name
    train: dict[str, Any]  # TrainConfig values without data, model and seed
    data: DataSpec
    paper: dict[str, float] = field(default_factory=dict)  # the paper's published scores of this row, by column


@dataclass(frozen=True)
class Grid:
    path: Path
    name: str
    description: str
    scale: str | None
    scale_description: str
    variants: tuple[Variant, ...]
    seeds: tuple[int, ...]
    tests: tuple[TestSet, ...]
    metrics: tuple[str, ...]
    translate: dict[str, Any]
    length_buckets: tuple[int, ...]
    baseline: str | None
    bootstrap_resamples: int
    claims: tuple[Claim, ...] = ()
    # Test sets and metrics of ``added_evaluation``: in ``tests``/``metrics`` (every run evaluated since they were
    # added is scored on them) but not in the fingerprints, so runs finished before keep their results.
    added_tests: tuple[str, ...] = ()
    added_metrics: tuple[str, ...] = ()
    # Lower update caps this scale had: a run that stopped early (by patience) under one of them is the same run
    # under the current cap, so its result stands; one that reached such a cap is trained again.
    earlier_max_updates: tuple[int, ...] = ()
    # Contrastive suites: not in the fingerprints either (scoring a run on a suite changes neither its training nor
    # its test-set scores); runs evaluated before a suite was added lack its results, and the report says so.
    contrastive: tuple[ContrastiveSuite, ...] = ()
    distill: DistillStep | None = None  # the step whose teacher the distilled variants learn from
    speed: SpeedSpec | None = None  # decoding timed as whole commands once the runs finish (adlnmt.experiment.speed)

    @property
    def fingerprinted_tests(self) -> tuple[TestSet, ...]:
        return tuple(t for t in self.tests if t.name not in self.added_tests)

    @property
    def fingerprinted_metrics(self) -> tuple[str, ...]:
        return tuple(m for m in self.metrics if m not in self.added_metrics)

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)


def slugify(name: str) -> str:
    """A directory name for a row label: runs of other characters become '-', e.g. '+ multi-att-1h' → 'multi-att-1h'."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", name).strip("-.") or "variant"


# --- training options ------------------------------------------------------------------------------------------


def _field_kinds(name: str) -> tuple[type, ...]:
    """The Python types a TrainConfig field accepts, from its annotation (e.g. 'int | None')."""
    kinds = {"int": int, "float": float, "str": str, "bool": bool, "None": type(None), "list[str]": list}
    return tuple(kinds[part.strip()] for part in str(TRAIN_FIELDS[name].type).split("|"))


def _train_options(reader: Reader, value: Any, where: str) -> dict[str, Any]:
    """A block of TrainConfig options (keys as the flags, '-' or '_'), each checked for name, type, choices and
    range."""
    if value is None:
        return {}
    options, spelled = {}, {}
    for key, item in reader.mapping(value, where).items():
        name = str(key).replace("-", "_")
        at = f"{where}.{key}"
        if name in spelled:  # d_model and d-model: one of the two values would silently win
            reader.fail(at, f"'{key}' and '{spelled[name]}' are one option, given twice")
        spelled[name] = key
        if name in CONTROLLED:
            reader.fail(at, f"set by the experiment (from {CONTROLLED[name]}), not a training option here")
        if name in MODEL_KEYS:
            reader.fail(at, "the architecture belongs to a variant (variants[i].preset, .encoder, .decoder)")
        if name not in TRAIN_FIELDS:
            reader.unknown(at, name, [n for n in TRAIN_FIELDS if n not in CONTROLLED], "training option")
        if name == "var":
            item = [f"{k}={v}" for k, v in item.items()] if isinstance(item, dict) else item
            if not isinstance(item, list) or not all(isinstance(v, str) for v in item):
                reader.fail(at, "expected NAME=VALUE strings or a mapping of NAME: VALUE")
        else:
            item = reader.typed(item, _field_kinds(name), at)
            choices = TRAIN_FIELDS[name].metadata.get("choices")
            if choices and item not in choices:
                reader.fail(at, f"{item!r} is not one of {', '.join(choices)}")
            bounds = bounds_of(TRAIN_FIELDS[name])
            if bounds is not None and item is not None and not bounds.holds(item):
                reader.fail(at, bounds.refusal(item))  # here, where it is written: the levels merge later
        if name in FOLDER_OPTIONS and item not in FOLDER_OPTIONS[name]:
            item = str(reader.path_value(item, at))  # relative to the grid file, as every path of a grid
        if name == "init_from" and item is not None:
            item = str(_pretrained(reader, item, at))
        options[name] = item
    return options


# --- data, tests, decoding -------------------------------------------------------------------------------------


def _pretrained(reader: Reader, value: Any, where: str) -> Path:
    """A pretrained model directory (``train.init_from``, ``data.vocab_from``), relative to the grid file."""
    from adlnmt.train.init_from import check_pretrained

    path = reader.path_value(value, where)
    try:
        check_pretrained(path)
    except UserError as err:
        reader.fail(where, str(err))
    return path


def _vocab_from(reader: Reader, options: dict[str, Any], where: str) -> None:
    """One vocabulary: with ``vocab_from`` (its model's), no vocabulary options of the grid's own."""
    if VOCAB_FROM in options and (given := [key for key in VOCAB_OPTIONS if key in options]):
        reader.fail(where, f"{', '.join(given)} with vocab_from: the data is encoded with that model's vocabulary")


def _prepare_options(reader: Reader, value: Any, where: str, with_paths: bool) -> dict[str, Any]:
    allowed = (*PATH_KEYS, *PREPARE_OPTIONS, VOCAB_FROM) if with_paths else (*PREPARE_OPTIONS, VOCAB_FROM)
    block = reader.mapping(value, where, allowed)
    options: dict[str, Any] = {}
    for key, item in block.items():
        at = f"{where}.{key}"
        if key == VOCAB_FROM:  # prepare() reads the model's vocab/
            options[key] = _pretrained(reader, item, at) / MODEL_VOCAB_DIR
        elif key in PATH_KEYS:
            options[key] = reader.path_value(item, at)
        else:
            options[key] = reader.typed(item, PREPARE_OPTIONS[key], at)
    if with_paths and (missing := [key for key in PATH_KEYS if key not in block]):
        reader.fail(where, f"missing {', '.join(missing)} (raw training and validation files to prepare)")
    if options.get("model_type", PREPARE_DEFAULTS.model_type) not in MODEL_TYPES:
        reader.fail(f"{where}.model_type", f"expected {' or '.join(MODEL_TYPES)}")
    try:  # prepare's own check, before any run: each block's values where they are written
        PrepareOptions(**{key: options[key] for key in PREPARE_OPTIONS if key in options}).check()
    except DataError as err:
        reader.fail(where, str(err))
    return options


def _tests(reader: Reader, value: Any, at: str = "test", taken: tuple[TestSet, ...] = ()) -> tuple[TestSet, ...]:
    if not isinstance(value, list) or not value:
        reader.fail(at, "expected a non-empty list of {name, src, ref} test sets")
    tests = list(taken)
    for i, item in enumerate(value):
        where = f"{at}[{i}]"
        block = reader.mapping(item, where, ("name", "src", "ref"))
        for key in ("name", "src", "ref"):
            if key not in block:
                reader.fail(where, f"missing '{key}'")
        name = reader.name(block["name"], f"{where}.name")
        if not NAME.fullmatch(name) or name in {t.name for t in tests}:
            reader.fail(f"{where}.name", f"{name!r} must be unique and use only letters, digits, '.', '_', '-'")
        tests.append(TestSet(name, reader.path_value(block["src"], f"{where}.src"),
                             reader.path_value(block["ref"], f"{where}.ref")))  # fmt: skip
    return tuple(tests[len(taken) :])


def _metric_names(reader: Reader, value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(m, str) for m in value):
        reader.fail(where, f"expected a list of metric names, got {value!r}")
    try:
        return parse_metrics(value)
    except UserError as err:
        reader.fail(where, str(err))


def _contrastive(reader: Reader, value: Any) -> tuple[ContrastiveSuite, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        reader.fail("contrastive", "expected a list of {name, suite, normalize} contrastive suites")
    suites: list[ContrastiveSuite] = []
    for i, item in enumerate(value):
        where = f"contrastive[{i}]"
        block = reader.mapping(item, where, ("name", "suite", "normalize"))
        for key in ("name", "suite"):
            if key not in block:
                reader.fail(where, f"missing '{key}'")
        name = reader.name(block["name"], f"{where}.name")
        if not NAME.fullmatch(name) or name in {s.name for s in suites}:
            reader.fail(f"{where}.name", f"{name!r} must be unique and use only letters, digits, '.', '_', '-'")
        normalize = reader.typed(block.get("normalize", False), bool, f"{where}.normalize")
        suites.append(ContrastiveSuite(name, reader.path_value(block["suite"], f"{where}.suite"), normalize))
    return tuple(suites)


def _is_date(value: Any) -> bool:
    """A date as YAML reads ``2026-11-26`` (unquoted) or as an ISO string (quoted)."""
    if isinstance(value, datetime.date):
        return True
    try:
        datetime.date.fromisoformat(str(value))
    except ValueError:
        return False
    return True


def _added_evaluation(reader: Reader, value: Any, tests: tuple[TestSet, ...], metrics: tuple[str, ...]
                      ) -> tuple[tuple[TestSet, ...], tuple[str, ...]]:  # fmt: skip
    """The test sets and metrics of ``added_evaluation`` (``since``: when they were added, for the reader)."""
    if value is None:
        return (), ()
    block = reader.mapping(value, "added_evaluation", ADDED_KEYS)
    if "test" not in block and "metrics" not in block:
        reader.fail("added_evaluation", "give 'test' (test sets) or 'metrics' added to the evaluation")
    if "since" in block and not _is_date(block["since"]):
        reader.fail("added_evaluation.since", f"expected a date (YYYY-MM-DD), got {block['since']!r}")
    added_tests = _tests(reader, block["test"], "added_evaluation.test", tests) if "test" in block else ()
    added_metrics = _metric_names(reader, block["metrics"], "added_evaluation.metrics") if "metrics" in block else ()
    for metric in added_metrics:
        if metric in metrics:
            reader.fail("added_evaluation.metrics", f"{metric!r} is already in 'metrics'")
    return added_tests, added_metrics


def _average(reader: Reader, value: dict, where: str) -> None:
    kind, count = next(iter(value.items())) if len(value) == 1 else ("", 0)
    if kind not in ("last", "best"):
        reader.fail(where, "expected {last: N} or {best: N} (checkpoints to average)")
    if reader.typed(count, int, f"{where}.{kind}") < 1:
        reader.fail(f"{where}.{kind}", "must be at least 1")


def _translate(reader: Reader, blocks: list[tuple[Any, str]]) -> dict[str, Any]:
    """Decoding options: defaults < the grid's ``translate`` < the scale's."""
    options = dict(TRANSLATE_DEFAULTS)
    for value, where in blocks:
        for key, item in reader.mapping(value or {}, where, TRANSLATE_OPTIONS).items():
            options[key] = reader.typed(item, TRANSLATE_OPTIONS[key], f"{where}.{key}")
            if key == "average":
                _average(reader, item, f"{where}.average")
    for key, f in SEARCH_FIELDS.items():
        if (bounds := bounds_of(f)) is not None and not bounds.holds(options[key]):
            reader.fail(f"translate.{key}", bounds.refusal(options[key]))
    if options["checkpoint"] not in ("best", "last"):
        reader.fail("translate.checkpoint", "expected best or last (or set translate.average)")
    return options


# --- variants --------------------------------------------------------------------------------------------------


def _variant(reader: Reader, item: Any, i: int, context: dict[str, Any]) -> Variant:
    where = f"variants[{i}]"
    block = reader.mapping(item, where)
    if "name" in block:
        where = f"variants[{i}] ({block['name']!r})"
    reader.mapping(block, where, VARIANT_KEYS)
    if "name" not in block:
        reader.fail(where, "missing 'name' (the row label in the results table)")
    name = reader.name(block["name"], f"{where}.name")
    if "," in name:
        reader.fail(f"{where}.name", "no commas in a variant's name: --variants lists names separated by commas")
    train = {**context["train"], **_train_options(reader, block.get("train"), f"{where}.train")}
    scale = context["scale"]
    if isinstance(given := block.get("scales"), dict) and given and not context["scales"]:
        reader.fail(f"{where}.scales", f"this grid defines no scales (no top-level 'scales:'), so a variant cannot "
                    f"choose one (given: {', '.join(map(str, given))}); define them under the top-level 'scales:', "
                    "or put their options in the variant's 'train:'")  # fmt: skip
    scales = reader.mapping(block.get("scales") or {}, f"{where}.scales")
    for chosen in scales:
        if chosen not in context["scales"]:
            reader.unknown(f"{where}.scales", str(chosen), context["scales"], "scale")
    if scale in scales:
        at = f"{where}.scales.{scale}"
        train.update(_train_options(reader, reader.mapping(scales[scale], at, ("train",)).get("train"), f"{at}.train"))
    _architecture(reader, block, where, bool(train.get("init_from")))
    model = {key: reader.name(block[key], f"{where}.{key}") for key in MODEL_KEYS if key in block}
    data = context["data"]
    if isinstance(block.get("data"), str):  # a prepared directory of its own
        data = _prepared_dir(reader, block["data"], f"{where}.data")
    elif block.get("data") is not None:
        if data.prepared is not None:
            reader.fail(f"{where}.data", "per-variant prepare options need the grid's 'data' to be a prepare block")
        overrides = _prepare_options(reader, block["data"], f"{where}.data", with_paths=False)
        merged = {**data.arguments(), **overrides}
        changed = {k: v for k, v in overrides.items() if data.arguments().get(k) != v}
        key = "-".join(f"{k}-{str(v).lower()}" for k, v in sorted(changed.items())) or data.key
        data = DataSpec(key, None, tuple(sorted(merged.items())))
    if data.arguments().get(VOCAB_FROM) != context["data"].arguments().get(VOCAB_FROM):
        reader.fail(f"{where}.data.vocab_from", "one model vocabulary per grid: give it in the grid's data")
    _vocab_from(reader, data.arguments(), f"{where}.data")
    if train.get("init_from") and data.prepared is None and VOCAB_FROM not in data.arguments():
        reader.fail(where, "train.init_from needs data encoded with the model's vocabulary: set data.vocab_from")
    values = {**train, **model}
    if context["repeat_scale"] != 1.0:
        _check_model(reader, where, values, data)  # an ADL error shown in the sentence as written, not as scaled
        values = _shallower(reader, where, values, context["repeat_scale"])
    _check_model(reader, where, values, data)
    published = reader.mapping(block.get("paper") or {}, f"{where}.paper")
    paper = {str(k): reader.typed(v, float, f"{where}.paper.{k}") for k, v in published.items()}
    return Variant(name, slugify(name), values, data, paper)


def _architecture(reader: Reader, block: dict[str, Any], where: str, pretrained: bool) -> None:
    """A variant's architecture: a preset or an encoder/decoder ADL pair; starting from a pretrained model
    (``train.init_from``), its own architecture unless the variant changes it (a preset, or one side or both)."""
    has_side = "encoder" in block or "decoder" in block
    if "preset" in block and has_side:
        reader.fail(where, "give either 'preset' or 'encoder' and 'decoder' (ADL chains), not both")
    if not pretrained and ("preset" not in block and not ("encoder" in block and "decoder" in block)):
        reader.fail(where, "give either 'preset' or both 'encoder' and 'decoder' (ADL chains), or train.init_from "
                    "(a pretrained model directory, whose architecture the variant then keeps or changes)")  # fmt: skip


def _shallower(reader: Reader, where: str, values: dict[str, Any], factor: float) -> dict[str, Any]:
    """``values`` with the encoder and decoder ADL (a preset's resolved into its options, a side a variant of a
    pretrained model leaves out taken from that model) scaled by ``factor`` in every ``repeat(n, …)`` count: a
    scale's shallower version of the published architectures."""
    from adlnmt.adl.parser import parse
    from adlnmt.adl.syntax import scale_repeats, to_text
    from adlnmt.presets import get_preset
    from adlnmt.store import ModelDir
    from adlnmt.train.config import preset_options

    if values.get("init_from") and not values.get("preset"):
        own = ModelDir(values["init_from"]).config()["model"]
        values = {**values, **{side: values.get(side) or own[side] for side in ("encoder", "decoder")}}
    if values.get("preset"):
        try:
            preset = get_preset(values["preset"])
        except UserError as err:
            reader.fail(where, str(err))
        options = preset_options(values["preset"], bool(values.get("init_from")))
        values = {**options, **{k: v for k, v in values.items() if k != "preset"}}
        values.update(encoder=preset.encoder, decoder=preset.decoder)
    for side in ("encoder", "decoder"):
        try:
            values[side] = to_text(scale_repeats(parse(values[side]), factor))
        except ADLError as err:
            reader.fail(f"{where}.{side}", err.render().rstrip())
    return values


def _check_beams(reader: Reader, variants: tuple[Variant, ...], translate: dict[str, Any], speed: SpeedSpec | None,
                 step: DistillStep | None) -> None:  # fmt: skip
    """No beam the grid asks for is wider than the target vocabulary it prepares (translate, speed and distillation
    would refuse it only after training): one error naming the key. The size of a vocabulary prepared elsewhere or
    imported (vocab_from) is not known here: translating checks those."""
    sizes = {v.name: int(v.data.arguments().get("vocab_size", PREPARE_DEFAULTS.vocab_size)) for v in variants
             if v.data.prepared is None and "vocab_from" not in v.data.arguments()}  # fmt: skip
    asked = [("translate.beam", int(translate.get("beam", SearchOptions().beam)), tuple(sizes))]
    if speed is not None:
        asked += [("speed.beams", beam, tuple(sizes)) for beam in speed.beams]
    if step is not None:
        asked.append(("distill.beam", step.options().beam, (step.teacher,)))
    for key, beam, names in asked:
        if narrow := [(sizes[n], n) for n in names if n in sizes and beam > sizes[n]]:
            size, name = min(narrow, key=lambda pair: pair[0])  # the narrowest, the first in the grid of those
            reader.fail(key, f"a beam of {beam} is wider than the target vocabulary of {name!r} ({size:,} pieces)")


def _check_model(reader: Reader, where: str, values: dict[str, Any], data: DataSpec) -> None:
    """Resolve the training options and build the model on the meta device: ADL and size errors before any run."""
    import torch

    from adlnmt.model import Seq2Seq
    from adlnmt.train.init_from import pretrained_model_config

    vocab = int(data.arguments().get("vocab_size", PREPARE_DEFAULTS.vocab_size))
    try:
        config = build_config({**values, "data": "", "model": ""})
        model = pretrained_model_config(config) if config.init_from else config.model_config(vocab, vocab)
        with torch.device("meta"):
            Seq2Seq(model)
    except ADLError as err:
        reader.fail(where, err.render().rstrip())
    except UserError as err:
        reader.fail(where, str(err))


def _claims(reader: Reader, value: Any, variants: tuple[Variant, ...], metrics: tuple[str, ...],
            tests: tuple[TestSet, ...]) -> tuple[Claim, ...]:  # fmt: skip
    if value is None:
        return ()
    if not isinstance(value, list):
        reader.fail("claims", "expected a list of claims")
    return tuple(_claim(reader, item, f"claims[{i}]", variants, metrics, tests) for i, item in enumerate(value))


def _claim(reader: Reader, item: Any, where: str, variants: tuple[Variant, ...], metrics: tuple[str, ...],
           tests: tuple[TestSet, ...]) -> Claim:  # fmt: skip
    names = [v.name for v in variants]
    block = reader.mapping(item, where, CLAIM_KEYS)
    kinds = [kind for kind in KINDS if kind in block]
    if len(kinds) != 1 or "quote" not in block:
        reader.fail(where, "give 'quote' and one of 'better: [A, B]', 'close: [A, B]' or 'equivalent: [A, B]' (with "
                    "'margin'), 'faster: [A, B]' (with 'ratio') or 'larger_gain: [[A, A0], [B, B0]]'")  # fmt: skip
    kind, pair = kinds[0], block[kinds[0]]
    steps: list[Any] = []
    if kind == "larger_gain":
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, list) and len(p) == 2 for p in pair)):
            reader.fail(f"{where}.{kind}", f"expected two steps [[A, from A0], [B, from B0]], got {pair!r}")
        steps, pair = pair, [pair[0][0], pair[1][0]]
        if steps[0] == steps[1] or any(to == start for to, start in steps):
            reader.fail(f"{where}.{kind}", f"expected two different steps, each between two rows, got {steps!r}")
    elif not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]:
        reader.fail(f"{where}.{kind}", f"expected two different variant names [A, B], got {pair!r}")
    for name in [name for step in steps for name in step] or pair:
        if name not in names:
            reader.unknown(f"{where}.{kind}", str(name), names, "variant")
    metric = "sentences_per_s" if kind == "faster" else str(block.get("metric", metrics[0]))
    if kind != "faster" and metric not in (*metrics, *RUN_METRICS):
        reader.unknown(f"{where}.metric", metric, [*metrics, *RUN_METRICS], "metric")
    if kind == "larger_gain" and metric in RUN_METRICS:
        reader.fail(f"{where}.metric", f"larger_gain compares test-set metrics ({', '.join(metrics)}), not {metric}")
    given = block.get("test", tests[0].name)
    parts = [str(name) for name in given] if isinstance(given, list) else [str(given)]
    for part in parts:
        if part not in {t.name for t in tests}:
            reader.unknown(f"{where}.test", part, [t.name for t in tests], "test set")
    if isinstance(given, list) and (len(set(parts)) != len(parts) or len(parts) < 2 or kind == "faster"
                                    or metric in RUN_METRICS or any(POOL in part for part in parts)):  # fmt: skip
        reader.fail(f"{where}.test", f"a pooled claim names two or more different test sets (names without "
                    f"{POOL.strip()!r}) on a test-set metric, and is no speed claim; got {given!r}")  # fmt: skip
    test = POOL.join(parts)
    for key, readers in KIND_KEYS.items():
        if key in block and kind not in readers:
            reader.fail(f"{where}.{key}", f"a {kind} claim does not read it (only {', '.join(readers)} claims do)")
    margin = reader.typed(block.get("margin", 0.0), float, f"{where}.margin")
    if margin < 0 or (kind == "equivalent" and margin == 0):
        reader.fail(f"{where}.margin", f"expected a {'positive' if kind == 'equivalent' else 'non-negative'} "
                    f"margin, got {margin:g}")  # fmt: skip
    ratio = reader.typed(block.get("ratio", 1.0), float, f"{where}.ratio")
    if ratio <= 0:
        reader.fail(f"{where}.ratio", f"expected a positive speed ratio, got {ratio:g}")
    words = [reader.typed(block.get(key, 0), int, f"{where}.{key}") for key in ("min_source_words", "max_source_words")]
    if min(words) < 0 or (words[1] and words[0] > words[1]) or (any(words) and metric in RUN_METRICS):
        reader.fail(where, "min_source_words/max_source_words: expected 0 ≤ min ≤ max (0: no bound), on a metric "
                    "scored per sentence")  # fmt: skip
    try:
        registered = registration_of(str(block.get("registered", "")))
    except ValueError as err:
        reader.fail(f"{where}.registered", str(err))
    quote = reader.text(block["quote"], f"{where}.quote")
    source = reader.text(block.get("where", ""), f"{where}.where", empty=True)
    scope = reader.text(block["out_of_scope"], f"{where}.out_of_scope") if "out_of_scope" in block else ""
    claim = Claim(quote, source, kind, pair[0], pair[1], margin, metric,
                  test, ratio, words[0], words[1], scope, *registered,
                  *(str(step[1]) for step in steps))  # fmt: skip
    return replace(claim, own_test_only=reader.typed(block.get("own_test_only", False), bool, f"{where}.own_test_only"))


# --- the grid --------------------------------------------------------------------------------------------------


def scale_names(path: str | Path) -> tuple[str, ...]:
    """The scales a grid file defines (without validating the rest)."""
    path = Path(path)
    return tuple(Reader(path).mapping(read_yaml(path, TOP_KEYS).get("scales") or {}, "scales"))


def _pick_scale(reader: Reader, raw: dict[str, Any], scale: str | None) -> tuple[str | None, dict[str, Any]]:
    scales = reader.mapping(raw.get("scales") or {}, "scales")
    if scale is None:
        scale = raw.get("default_scale") or ("full" if "full" in scales else None)
        if scale is None and scales:
            reader.fail("scales", f"choose one with --scale ({', '.join(scales)}) or set default_scale")
    if scale is not None and scale not in scales:
        known = ", ".join(scales) or "none"
        where = "default_scale" if raw.get("default_scale") == scale else ""
        reader.fail(where, f"no scale {scale!r} in this grid (scales: {known})")
    chosen = reader.mapping(scales.get(scale) or {}, f"scales.{scale}", SCALE_KEYS) if scale else {}
    for name, block in scales.items():
        reader.mapping(block or {}, f"scales.{name}", SCALE_KEYS)
    return scale, chosen


def _prepared_dir(reader: Reader, value: Any, where: str) -> DataSpec:
    """An existing prepared directory (keyed by its path: variants may name different ones)."""
    path = reader.path_value(value, where)
    return DataSpec(str(path), path)


def _data(reader: Reader, raw: dict[str, Any], chosen: dict[str, Any], scale: str | None) -> DataSpec:
    if "data" not in raw:
        reader.fail("", "missing 'data' (a prepared directory, or train_src/train_tgt/valid_src/valid_tgt to prepare)")
    if isinstance(raw["data"], str):
        if chosen.get("data") is not None:
            reader.fail(f"scales.{scale}.data", "prepare options need the grid's 'data' to be a prepare block")
        return _prepared_dir(reader, raw["data"], "data")
    options = _prepare_options(reader, raw["data"], "data", with_paths=True)
    _vocab_from(reader, options, "data")
    if chosen.get("data") is not None:
        options.update(_prepare_options(reader, chosen["data"], f"scales.{scale}.data", with_paths=False))
        _vocab_from(reader, options, f"scales.{scale}.data")
    return DataSpec("default", None, tuple(sorted(options.items())))


def _scale_rows(reader: Reader, value: Any, where: str, variants: tuple[Variant, ...], claims: tuple[Claim, ...],
                baseline: str | None) -> tuple[tuple[Variant, ...], tuple[Claim, ...]]:  # fmt: skip
    """The variants a scale trains (its ``variants``: names, in the grid's order) and the claims on those rows alone."""
    if not isinstance(value, list) or not value:
        reader.fail(where, "expected a non-empty list of the grid's variant names")
    names = [v.name for v in variants]
    for i, name in enumerate(value):
        if name not in names:
            reader.unknown(f"{where}[{i}]", str(name), names, "variant")
    kept = set(value)
    if baseline is not None and baseline not in kept:
        reader.fail(where, f"keep the grid's baseline {baseline!r}: every other row is compared with it")
    return (tuple(v for v in variants if v.name in kept), tuple(c for c in claims if kept.issuperset(c.rows)))


def load_grid(path: str | Path, scale: str | None = None) -> Grid:
    """Parse and validate a grid file at one scale (default: ``default_scale``, else ``full`` if defined).

    Files are not opened here (``runner.check_inputs`` does that before running), so a grid can be checked on a
    machine without its corpus.
    """
    path = Path(path)
    raw = read_yaml(path, TOP_KEYS)
    reader = Reader(path)
    scale, chosen = _pick_scale(reader, raw, scale)
    at = f"scales.{scale}"
    for key in ("name", "variants", "test"):
        if key not in raw:
            reader.fail("", f"missing '{key}'")
    name = reader.name(raw["name"], "name")
    if not NAME.fullmatch(name):
        reader.fail(
            "name", "use only letters, digits, '.', '_' and '-', not dots alone (it names the output directory)"
        )
    data = _data(reader, raw, chosen, scale)
    train = {
        **_train_options(reader, raw.get("train"), "train"),
        **_train_options(reader, chosen.get("train"), f"{at}.train"),
    }
    seeds_value, seeds_where = (
        (chosen["seeds"], f"{at}.seeds") if "seeds" in chosen else (raw.get("seeds", [1]), "seeds")
    )
    metrics = _metric_names(reader, raw.get("metrics", ["bleu", "chrf"]), "metrics")
    if not isinstance(raw.get("variants"), list) or not raw["variants"]:
        reader.fail("variants", "expected a non-empty list of variants")
    repeat_scale = reader.typed(chosen.get("repeat_scale", 1.0), float, f"{at}.repeat_scale")
    if not 0 < repeat_scale <= 1:
        reader.fail(f"{at}.repeat_scale", f"must be in (0, 1], got {repeat_scale}")
    context = {"train": train, "scale": scale, "scales": tuple(reader.mapping(raw.get("scales") or {}, "scales")),
               "data": data, "repeat_scale": repeat_scale}  # fmt: skip
    variants = tuple(_variant(reader, item, i, context) for i, item in enumerate(raw["variants"]))
    for kind in ("name", "slug"):
        seen: dict[str, int] = {}
        for i, variant in enumerate(variants):
            value = getattr(variant, kind)
            if value in seen:
                why = (" (a run folder keeps A-Z, a-z, 0-9, '.' and '_' of a name, other characters become '-'): "
                       f"runs/{value}; rename one" if kind == "slug" else "")  # fmt: skip
                first = seen[value]
                reader.fail("variants", f"variants[{i}] ({variant.name!r}) and variants[{first}] "
                            f"({variants[first].name!r}) have the same {kind} {value!r}{why}")  # fmt: skip
            seen[value] = i
    seeds = reader.positive_ints(seeds_value, seeds_where)
    step = distill_step.read_step(reader, raw.get("distill"), {v.name: v.slug for v in variants}, seeds)
    taught = distill_step.students(reader, raw["variants"], step)
    if step is not None and not taught:
        reader.fail("distill", "no variant is marked 'distilled: true', so its teacher would teach no one: mark "
                    "the students, or remove the section")  # fmt: skip
    if taught:
        assert step is not None
        teacher = next(v for v in variants if v.name == step.teacher)
        data_of = DataSpec(step.key, None, teacher.data.prepare, step)
        variants = tuple(replace(v, data=data_of) if v.name in taught else v for v in variants)
    baseline = raw.get("baseline")
    if baseline is not None and baseline not in {v.name for v in variants}:
        reader.unknown("baseline", str(baseline), [v.name for v in variants], "variant")
    resamples = reader.typed(raw.get("bootstrap_resamples", RESAMPLES), int, "bootstrap_resamples")
    if resamples < 1:
        reader.fail("bootstrap_resamples", "must be at least 1")
    tests = _tests(reader, raw["test"])
    added_tests, added_metrics = _added_evaluation(reader, raw.get("added_evaluation"), tests, metrics)
    tests, metrics = tests + added_tests, metrics + added_metrics
    claims = _claims(reader, raw.get("claims"), variants, metrics, tests)
    speed = parse_speed(reader, raw.get("speed"), tuple(t.name for t in tests), tuple(v.name for v in variants))
    if "variants" in chosen:
        variants, claims = _scale_rows(reader, chosen["variants"], f"{at}.variants", variants, claims, baseline)
    taught = [v.name for v in variants if v.data.distill is not None]
    if taught and step is not None and step.teacher not in {v.name for v in variants}:
        reader.fail(f"{at}.variants", f"keep the teacher {step.teacher!r}: {', '.join(taught)} learn from it")
    earlier_caps = ()
    if "earlier_max_updates" in chosen:
        earlier_caps = reader.positive_ints(chosen["earlier_max_updates"], f"{at}.earlier_max_updates")
    cap = train.get("max_updates", TrainConfig.max_updates)
    if earlier_caps and not (cap and max(earlier_caps) < cap):
        reader.fail(f"{at}.earlier_max_updates", f"earlier caps must lie below this scale's max_updates ({cap})")
    translate = _translate(reader, [(raw.get("translate"), "translate"), (chosen.get("translate"), f"{at}.translate")])
    if taught and step is not None and step.checkpoint == "averaged" and not translate.get("average"):
        reader.fail("distill.checkpoint", "'averaged' is the checkpoint translate.average writes, and this grid has "
                    "no translate.average (at this scale): set one (e.g. translate: {average: {best: 5}}) or let "
                    "the best or last checkpoint teach")  # fmt: skip
    _check_beams(reader, variants, translate, speed, step)
    return Grid(
        path=path,
        name=name,
        description=reader.text(raw.get("description", ""), "description", empty=True),
        scale=scale,
        scale_description=reader.text(chosen.get("description", ""), f"{at}.description", empty=True),
        variants=variants,
        seeds=seeds,
        tests=tests,
        metrics=metrics,
        translate=translate,
        length_buckets=reader.positive_ints(raw.get("length_buckets", [10, 20, 30]), "length_buckets", increasing=True),
        baseline=baseline,
        bootstrap_resamples=resamples,
        claims=claims,
        added_tests=tuple(t.name for t in added_tests),
        added_metrics=added_metrics,
        earlier_max_updates=earlier_caps,
        contrastive=_contrastive(reader, raw.get("contrastive")),
        distill=step if taught else None,
        speed=speed and speed.of_rows(tuple(v.name for v in variants)),
    )
