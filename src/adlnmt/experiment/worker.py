"""One run of an experiment in its own process: ``python -m adlnmt.experiment.worker RUN_DIR``.

Trains as ``adlnmt train --config RUN_DIR/train.yaml`` does (which resumes an interrupted run exactly), marks the
training complete in ``trained.json``, translates every test set with the grid's decoding options, scores it and
writes ``result.json`` last. Test sentences are translated one source-length bucket at a time, so the decoding
time per sentence by length (AAN Fig. 7) comes from the same pass that produces the hypotheses; where the runner
runs several workers, that pass waits until the others are stopped (:mod:`adlnmt.experiment.quiet`).
"""

from __future__ import annotations

import fcntl
import json
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, NamedTuple

from adlnmt.bench.machine import BusyBeside
from adlnmt.errors import UserError
from adlnmt.exits import exit_status
from adlnmt.experiment.grid import GRID_SEARCH
from adlnmt.experiment.quiet import decoding_alone, paused_seconds, registered_training, timed_alone
from adlnmt.experiment.results import (
    RESULT_FILE,
    CodeVersion,
    CurvePoint,
    Distillation,
    Evaluation,
    LengthBucket,
    Machine,
    Provenance,
    RunResult,
    SuiteResult,
    Timing,
    TrainingSession,
)
from adlnmt.experiment.runner import STOPPED, write_json
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.translator import Translator
from adlnmt.jsontext import parse_json, read_object
from adlnmt.store import ModelDir, weights_digest
from adlnmt.store.atomic import file_sha256, write_text_atomic
from adlnmt.store.names import METRICS


def bucket_labels(bounds: list[int]) -> list[str]:
    """``[10, 20]`` → ``["1-10", "11-20", "21+"]`` (source lengths in whitespace-separated words)."""
    lows = [1, *(b + 1 for b in bounds)]
    return [f"{low}-{high}" for low, high in zip(lows, bounds, strict=False)] + [f"{lows[-1]}+"]


def bucket_of(length: int, bounds: list[int]) -> int:
    return next((i for i, bound in enumerate(bounds) if length <= bound), len(bounds))


def length_groups(sources: list[str], bounds: list[int]) -> list[list[int]]:
    """The rows of ``sources`` in each length bucket of :func:`bucket_labels` (source words)."""
    groups: list[list[int]] = [[] for _ in range(len(bounds) + 1)]
    for i, line in enumerate(sources):
        groups[bucket_of(len(line.split()), bounds)].append(i)
    return groups


def bucket_scores(hypotheses: list[str], references: list[str], groups: list[list[int]],
                  metrics: list[str]) -> list[dict[str, float]]:  # fmt: skip
    """The corpus scores of each length bucket's rows (``{}`` for an empty bucket)."""
    from adlnmt.metrics import score

    found = []
    for rows in groups:
        scores = score([hypotheses[i] for i in rows], [references[i] for i in rows], metrics) if rows else {}
        found.append({m: scores[m] for m in metrics} if rows else {})
    return found


TRAINING_SESSIONS = "training-sessions.jsonl"  # one line per start or resumption of the training


def choose_weights(model_dir: Path, translate: dict[str, Any], records: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The checkpoint to translate with: best or last, or ``averaged`` over (at most) the N last or best ones."""
    if not translate.get("average"):
        return translate["checkpoint"], []
    from adlnmt.average import select_checkpoints, write_average

    kind, count = next(iter(translate["average"].items()))
    files = ModelDir(model_dir).checkpoints()
    scored = {r["update"] for r in records}
    available = len(files) if kind == "last" else sum(1 for update in files if update in scored)
    count = min(count, available)
    paths = select_checkpoints(model_dir, count if kind == "best" else None, count if kind == "last" else None)
    write_average(model_dir, paths)
    return "averaged", [path.name for path in paths]


class Translated(NamedTuple):
    hypotheses: list[str]  # in input order
    tokens: int  # target tokens decoded (pieces + EOS)
    buckets: list[dict[str, Any]]  # per length bucket: its label, rows and seconds
    busy_beside: float | None  # cores other processes kept busy meanwhile (adlnmt.bench.machine.BusyBeside)


def translate_by_length(translator: Translator, sources: list[str], bounds: list[int],
                        options: SearchOptions) -> Translated:  # fmt: skip
    """Translate ``sources`` one length bucket at a time, each bucket timed."""
    groups = length_groups(sources, bounds)
    translator.search([next((s for s in sources if s.strip()), "a")], options)  # warm-up, not timed
    hypotheses, tokens, buckets = [""] * len(sources), 0, []
    beside = BusyBeside()
    for label, rows in zip(bucket_labels(bounds), groups, strict=True):
        start = time.perf_counter()
        found = translator.search([sources[i] for i in rows], options) if rows else []
        buckets.append({"label": label, "rows": rows, "seconds": time.perf_counter() - start})
        for row, hyps in zip(rows, found, strict=True):
            hypotheses[row] = hyps[0].text if hyps else ""
            tokens += len(hyps[0].pieces) + 1 if hyps else 0
    return Translated(hypotheses, tokens, buckets, beside.cores())


def evaluate_test(translator: Translator, test: dict[str, str], spec: dict[str, Any], out: Path) -> Evaluation:
    """Translate one test set (timed by length bucket), write the hypotheses, score the whole and each bucket."""
    from adlnmt.metrics import read_lines, score

    translate, metrics = spec["translate"], spec["metrics"]
    options = SearchOptions(**{key: translate[key] for key in GRID_SEARCH})
    sources, references = read_lines(test["src"]), read_lines(test["ref"])
    if len(sources) != len(references):
        raise UserError(f"{test['src']} has {len(sources)} lines but {test['ref']} has {len(references)}")
    hypotheses, tokens, buckets, busy_beside = translate_by_length(translator, sources, spec["length_buckets"], options)
    hyp_path = out / "hyp" / f"{test['name']}.txt"
    write_text_atomic(hyp_path, "".join(h + "\n" for h in hypotheses))
    scores = score(hypotheses, references, metrics, hyp_name=str(hyp_path), ref_name=test["ref"])
    by_bucket = bucket_scores(hypotheses, references, [bucket["rows"] for bucket in buckets], metrics)
    scored = [LengthBucket(label=bucket["label"], seconds=bucket["seconds"], sentences=len(bucket["rows"]),
                           ms_per_sentence=1000 * bucket["seconds"] / len(bucket["rows"]) if bucket["rows"] else None,
                           scores=found) for bucket, found in zip(buckets, by_bucket, strict=True)]  # fmt: skip
    seconds = sum(b.seconds for b in scored)
    return Evaluation(
        scores={m: scores[m] for m in metrics},
        signatures={m: scores[f"{m}_signature"] for m in metrics},
        hypotheses=str(hyp_path.relative_to(out)),
        sentences=len(sources),
        timing=Timing(
            decode_seconds=seconds,
            sentences_per_s=len(sources) / seconds if seconds else None,
            tokens_per_s=tokens / seconds if seconds else None,
            buckets=scored,
            busy_beside=busy_beside,
        ),
    )


def contrastive(model_dir: Path, checkpoint: str, device: str, suite: dict[str, Any]) -> SuiteResult:
    """The run's accuracy on one contrastive suite (adlnmt.analysis.contrastive), with each item's outcome."""
    from adlnmt.analysis.contrastive import evaluate_model

    found = evaluate_model(model_dir, suite["suite"], checkpoint, device, normalize=suite["normalize"])
    return SuiteResult(**{part.name: found[part.name] for part in fields(SuiteResult)})


def code_version() -> CodeVersion:
    """The git commit of the code that runs (and whether its tracked files differ from it), where it is a clone."""
    import subprocess

    from adlnmt import version

    source = Path(version.__file__).resolve().parent

    def git(*args: str) -> str | None:
        done = subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no")) if commit else None
    return CodeVersion(git_commit=commit, git_dirty=dirty, adlnmt=version.__version__)


def read_training_sessions(run_dir: Path) -> list[TrainingSession]:
    """When each training session of the run started, and the code version it ran (none recorded for sessions
    before 2026-11-23, when this record began)."""
    path = run_dir / TRAINING_SESSIONS
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [TrainingSession.from_dict(parse_json(line)) for line in lines if line.strip()]


def distillation_of(data_dir: Path) -> Distillation | None:
    """The distillation ``data_dir`` holds (:mod:`adlnmt.distill.kd`), by content; None for data of references."""
    from adlnmt.distill.kd import distillation_identity, distilled_record

    record = distilled_record(data_dir)
    return Distillation.from_dict(distillation_identity(record)) if record is not None else None


def data_dir_of(run_dir: Path) -> Path:
    """The data directory the run trains on (its ``train.yaml``)."""
    from adlnmt.train.config import load_yaml

    return Path(load_yaml(run_dir / "train.yaml")["data"])


def check_distillation(data_dir: Path, spec: dict[str, Any]) -> None:
    """UserError when a student would train on other translations than the grid's finished students of its teacher
    did (``spec["distillation"]``: theirs, written by :func:`adlnmt.experiment.runner.write_spec`): a teacher trained
    again may translate differently, and a row would then mix two distillations."""
    if (expected := spec.get("distillation")) is None:
        return
    found = distillation_of(data_dir)
    if found is not None and found.translations_sha256 == expected["translations_sha256"]:
        return
    what = f"translations (SHA-256 {found.translations_sha256[:12]}…)" if found else "no distillation"
    raise UserError(
        f"{data_dir}: holds {what}, not those that {expected['run']}, a finished student of the same teacher, trained "
        f"on (SHA-256 {expected['translations_sha256'][:12]}…). A teacher trained again may translate differently, "
        "and a row would mix two distillations: bring the distilled data that student trained on here, or train every "
        "student of this teacher again (--rerun)"
    )


def evaluate(run_dir: Path, spec: dict[str, Any]) -> RunResult:
    """Everything result.json holds: sizes, training summary and curve, each test set's scores and speed, and the
    provenance (code version, machine, wall-clock)."""
    import torch

    from adlnmt.train.device import full_fp32, pick_device, tf32_allowed
    from adlnmt.train.model_dir import read_stored_config

    torch.set_num_threads(spec["threads"])
    model_dir = run_dir / "model"
    stored = read_stored_config(model_dir)
    if stored["train"]["precision"] == "fp32":
        full_fp32()  # as the trainer set it, also where this process only evaluates
    records = ModelDir(model_dir).checkpoint_records()
    if not records:
        raise UserError(f"{model_dir}: training wrote no checkpoint record ({METRICS})")
    last = records[-1]
    best = next((r for r in records if r["update"] == last["best_update"]), last)
    checkpoint, averaged = choose_weights(model_dir, spec["translate"], records)
    device = str(pick_device(spec["device"], 0))
    translator = Translator.load(model_dir, checkpoint, device)
    started = time.perf_counter()
    with decoding_alone(run_dir):
        tests = {test["name"]: evaluate_test(translator, test, spec, run_dir) for test in spec["tests"]}
    suites = {suite["name"]: contrastive(model_dir, checkpoint, device, suite) for suite in spec.get("contrastive", [])}
    paused_minutes = paused_seconds(run_dir) / 60
    train_minutes = max(0.0, last["train_minutes"] - paused_minutes)
    curve_keys = {part.name for part in fields(CurvePoint)}
    return RunResult(
        fingerprint=spec["fingerprint"],
        experiment=spec["experiment"],
        scale=spec["scale"],
        variant=spec["variant"],
        seed=spec["seed"],
        parameters=stored["parameters"],
        canonical=stored["canonical"],
        updates=last["update"],
        epochs=last["epoch"],
        train_minutes=train_minutes,
        train_tokens_per_s=sum(r["tokens_per_s"] for r in records) / len(records),
        best_update=best["update"],
        best_valid_ppl=best["valid_ppl"],
        best_valid_bleu=best.get("valid_bleu"),
        checkpoint=checkpoint,
        averaged=averaged,
        device=device,
        threads=spec["threads"],
        curve=[CurvePoint(**{key: value for key, value in r.items() if key in curve_keys}) for r in records],
        tests=tests,
        contrastive=suites,
        provenance=Provenance(
            code=code_version(),
            training_sessions=read_training_sessions(run_dir),
            adl=stored["canonical"],
            precision=stored["train"]["precision"],
            tf32_allowed=tf32_allowed(),
            machine=Machine.here(device),
            train_minutes=train_minutes,
            paused_minutes=paused_minutes,
            timed_alone=timed_alone(),
            evaluate_minutes=(time.perf_counter() - started) / 60,
            weights_sha256=file_sha256(weights := ModelDir(model_dir).resolve(checkpoint)),
            weights_digest=weights_digest(weights),
            distillation=distillation_of(data_dir_of(run_dir)),
        ),
    )


def main(argv: list[str] | None = None) -> int:
    run_dir = Path((argv if argv is not None else sys.argv[1:])[0])
    with open(run_dir / "lock", "w") as lock:
        try:  # a second experiment process on the same output directory must not run this run too
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"error: {run_dir} is being run by another process", file=sys.stderr)
            return 3
        return run(run_dir)


def train(run_dir: Path) -> str:
    """Train the run's model on ``RUN_DIR/train.yaml`` as ``adlnmt train --config`` does (an interrupted training
    resumes exactly); the name of the stop signal that ended it with a checkpoint, "" when it ended normally."""
    from adlnmt.train.config import build_config, load_yaml
    from adlnmt.train.trainer import Trainer

    config = run_dir / "train.yaml"
    print(f"training: adlnmt train --config {config}", file=sys.stderr, flush=True)
    with open(run_dir / TRAINING_SESSIONS, "a", encoding="utf-8") as sessions:  # a run may resume under newer code
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        session = TrainingSession(started=started, code=code_version())
        sessions.write(json.dumps(session.to_dict()) + "\n")
    return Trainer(build_config(load_yaml(config))).train()["signal"]


def run(run_dir: Path) -> int:
    """:func:`train_and_evaluate` → the exit status of the run (2 for a user error, with its message)."""
    return exit_status(lambda: train_and_evaluate(run_dir), "train")


def train_and_evaluate(run_dir: Path) -> int:
    """Train unless trained.json matches, then evaluate and write result.json."""
    spec = parse_json((run_dir / "run.json").read_text(encoding="utf-8"))
    trained = read_object(run_dir / "trained.json") or {}
    if trained.get("fingerprint") != spec["train_fingerprint"]:
        check_distillation(data_dir_of(run_dir), spec)
        with registered_training(run_dir):
            stopped_by = train(run_dir)
        if stopped_by:
            print(f"stopped by {stopped_by}: training checkpointed; running the experiment again resumes it",
                  file=sys.stderr)  # fmt: skip
            return STOPPED[stopped_by]
        write_json(run_dir / "trained.json", {"fingerprint": spec["train_fingerprint"]})
    print("translating and scoring the test sets", file=sys.stderr, flush=True)
    evaluate(run_dir, spec).save(run_dir / RESULT_FILE)
    print("finished", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
