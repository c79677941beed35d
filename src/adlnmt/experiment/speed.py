"""Speed as a measured axis of a grid: its optional ``speed:`` section.

Once a grid's runs have finished, each finished run's decoding of one test set is timed as a whole command, as a
user times it: ``adlnmt translate`` from the start of the process to its end (loading included), per engine
(``torch``: the model directory; ``ctranslate2`` and ``onnxruntime``: an export of it, made once per run, where the
architecture can be exported), beam size and precision, ``threads`` CPU threads (or ``workers`` batches at a time on
one thread each: ``translate --workers``), ``repeats`` times. The runs are timed one after another in this process,
never beside training: adlnmt training on the machine is stopped meanwhile
(:func:`adlnmt.experiment.quiet.machine_alone`), and every repeat records the load average before it and the cores
other processes kept busy (:class:`adlnmt.bench.machine.BusyBeside`). Each (engine, beam) gets the median of its
repeats with a distribution-free interval (order statistics; its coverage is stated), its sentences per second and
the grid's first metric of its output (the quality at that speed: an int8 engine's output is not the run's own).

``speed.json`` (this module owns it) is kept beside the run's archived ``result.json``, with the settings, the run's
fingerprint and the machine; a run whose record matches both is not timed again. The report gets a section: the
table and the timed outputs' BLEU (the grid's first metric) against sentences per second with the Pareto frontier
per beam. The section's own claims, ``faster: [A, B]`` with ``ratio``, ``beam`` and ``engine``, are judged with the
grid's other claims into claims.md and claims.json (:mod:`adlnmt.experiment.judge`, from the records read here).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from adlnmt.bench.machine import BUSY_BESIDE_LIMIT
from adlnmt.errors import UserError
from adlnmt.experiment.speed_spec import EXPORTS, PRECISIONS, SpeedSpec
from adlnmt.jsontext import parse_json
from adlnmt.store.atomic import atomic_write
from adlnmt.verdicts.claims import TIMED_TOGETHER_MINUTES

SPEED_FILE = "speed.json"
FORMAT_VERSION = 1
TRANSLATE_FLAGS = ("batch_size", "length_penalty", "max_len_ratio")  # of the grid's translate, passed on
INTERVAL_COVERAGE = 0.9  # the narrowest order-statistic interval of the median with at least this coverage


def median_interval(values: list[float], coverage: float = INTERVAL_COVERAGE) -> tuple[float, float, float, float]:
    """The median of ``values``, the narrowest interval of order statistics [x_(j), x_(n+1−j)] whose coverage of the
    true median is at least ``coverage`` (else the widest, [min, max]) and that interval's exact coverage
    1 − 2·P(Binomial(n, ½) < j)."""
    ordered, n = sorted(values), len(values)

    def covered(j: int) -> float:
        return 1 - 2 * sum(math.comb(n, i) for i in range(j)) / 2**n

    j = max((j for j in range(1, (n + 1) // 2 + 1) if covered(j) >= coverage), default=1)
    return statistics.median(ordered), ordered[j - 1], ordered[n - j], covered(j)


@dataclass(frozen=True)
class Measurement:
    """The repeats of one (engine, beam) of one run, or why it was not timed (``skipped``)."""

    engine: str
    beam: int
    sentences: int
    seconds: tuple[float, ...] = ()  # wall seconds of each whole command
    load: tuple[float, ...] = ()  # the 1-minute load average before each repeat
    busy_beside: tuple[float | None, ...] = ()  # cores other processes kept busy during each repeat
    skipped: str = ""
    score: float | None = None  # the grid's first metric of the timed output (None in records from before it)

    @property
    def sentences_per_s(self) -> float | None:
        return self.sentences / statistics.median(self.seconds) if self.seconds else None

    @property
    def beside_others(self) -> bool:
        """Whether a repeat ran with more than ``BUSY_BESIDE_LIMIT`` cores busy beside it: not a speed to compare."""
        return any(busy is not None and busy > BUSY_BESIDE_LIMIT for busy in self.busy_beside)

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "beam": self.beam, "sentences": self.sentences, "seconds": list(self.seconds),
                "load": list(self.load), "busy_beside": list(self.busy_beside), "skipped": self.skipped,
                "score": self.score}  # fmt: skip

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Measurement:
        busy = tuple(None if b is None else float(b) for b in record["busy_beside"])
        return cls(str(record["engine"]), int(record["beam"]), int(record["sentences"]),
                   tuple(float(s) for s in record["seconds"]), tuple(float(x) for x in record["load"]), busy,
                   str(record["skipped"]), None if record.get("score") is None else float(record["score"]))  # fmt: skip


@dataclass(frozen=True)
class SpeedRecord:
    """``speed.json``: a run's timings with what they depend on."""

    fingerprint: str
    checkpoint: str
    settings: dict[str, Any]
    machine: dict[str, Any]
    measurements: tuple[Measurement, ...]

    def find(self, engine: str, beam: int) -> Measurement | None:
        return next((m for m in self.measurements if (m.engine, m.beam) == (engine, beam)), None)

    @property
    def processor(self) -> str:
        """The processor it was timed on, e.g. "Intel(R) Xeon(R) Processor (AVX512)"."""
        return f"{self.machine.get('cpu')} ({self.machine.get('cpu_capability')})"

    def timed_with(self, other: SpeedRecord) -> bool:
        """Whether the two records were timed on one processor within ``TIMED_TOGETHER_MINUTES`` of each other:
        only then do their speeds compare as a ratio."""
        dates = [datetime.fromisoformat(str(r.machine.get("date"))) for r in (self, other)]
        together = abs(dates[0] - dates[1]) <= timedelta(minutes=TIMED_TOGETHER_MINUTES)
        return self.processor == other.processor and together

    def save(self, path: Path) -> None:
        record = {"format_version": FORMAT_VERSION, "fingerprint": self.fingerprint, "checkpoint": self.checkpoint,
                  "settings": self.settings, "machine": self.machine,
                  "measurements": [m.to_dict() for m in self.measurements]}  # fmt: skip
        text = json.dumps(record, indent=1) + "\n"
        atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))

    @classmethod
    def load(cls, path: Path) -> SpeedRecord | None:
        """The record in ``path``; None when there is none, and (with a warning) when it is damaged."""
        if not path.is_file():
            return None
        try:
            record = parse_json(path.read_bytes())
            if record.get("format_version") != FORMAT_VERSION:
                raise ValueError(f"format version {record.get('format_version')!r}")
            measurements = tuple(Measurement.from_dict(m) for m in record["measurements"])
            return cls(str(record["fingerprint"]), str(record["checkpoint"]), dict(record["settings"]),
                       dict(record["machine"]), measurements)  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            print(f"warning: {path}: damaged speed record ({err}); the run is timed again", file=sys.stderr)
            return None


def run_record(run: Any, spec: SpeedSpec) -> SpeedRecord | None:
    """The run's speed record when it holds timings of its current result and the grid's speed settings."""
    record = SpeedRecord.load(run.archive / SPEED_FILE)
    result = run.result()
    if record is None or result is None or record.settings != spec.settings():
        return None
    return record if (record.fingerprint, record.checkpoint) == (result.fingerprint, result.checkpoint) else None


def adlnmt_command(*argv: str) -> list[str]:
    """``adlnmt ARGV`` as a command line run by this Python."""
    return [sys.executable, "-m", "adlnmt", *argv]


def _environment() -> dict[str, str]:
    """This process's environment, with this adlnmt first on the path (the child runs the same code)."""
    source = str(Path(__file__).resolve().parents[2])  # the folder holding this adlnmt package
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)}


def _run(command: list[str], what: str) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, env=_environment(), check=False)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise UserError(f"{what} failed (exit status {done.returncode}): {reason}")
    return done


def _export(run: Any, checkpoint: str, spec: SpeedSpec, engine: str) -> tuple[Path | None, str]:
    """The run's export for ``engine`` in the precision timed (made once), or None and why it cannot be made."""
    out = run.dir / "speed" / f"{engine}-{spec.precision}-{checkpoint}"
    if (out / "export.json").is_file():
        return out, ""
    export_format, name = EXPORTS[engine]
    command = adlnmt_command("export", "--model", str(run.model_dir), "--checkpoint", checkpoint, "--format",
                             export_format, "--quantize", PRECISIONS[spec.precision], "--out", str(out))  # fmt: skip
    try:
        _run(command, f"{run.label}: the {name} export")
    except UserError as err:
        return None, str(err).split(": ", 1)[-1]
    return out, ""


def time_run(run: Any, spec: SpeedSpec, test: Any, translate: dict[str, Any], metric: str) -> SpeedRecord:
    """Time ``run`` as ``spec`` says (see the module) on ``test`` (a grid test set) and score each engine's and beam's
    output with ``metric`` against its references: the quality at that speed (int8 engines differ from the run's
    own fp32 decoding)."""
    import torch

    from adlnmt.bench.machine import BusyBeside, machine_record
    from adlnmt.data.corpus import read_lines
    from adlnmt.metrics import score

    result = run.result()
    lines, references = list(read_lines(test.src)), list(read_lines(test.ref))
    if spec.lines:
        lines, references = lines[: spec.lines], references[: spec.lines]
    measurements = []
    with tempfile.TemporaryDirectory() as scratch:
        text = Path(scratch) / "source.txt"
        text.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        options = [f"--{key.replace('_', '-')}={translate[key]}" for key in TRANSLATE_FLAGS]
        for engine in spec.engines:
            model, why = (run.model_dir, "") if engine == "torch" else _export(run, result.checkpoint, spec, engine)
            for beam in spec.beams:
                if model is None:
                    measurements.append(Measurement(engine, beam, len(lines), skipped=why))
                    continue
                output = Path(scratch) / f"{engine}-{beam}"
                command = adlnmt_command(
                    "translate", "--model", str(model), "--input", str(text), "--output", str(output),
                    "--engine", engine, "--beam", str(beam), "--threads", str(spec.threads), "--precision",
                    spec.precision, *options, *(["--checkpoint", result.checkpoint] if engine == "torch" else []),
                    *(["--workers", str(spec.workers)] if spec.workers > 1 else []),
                )  # fmt: skip
                seconds, load, busy = [], [], []
                for _ in range(spec.repeats):
                    load.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"))
                    beside, started = BusyBeside(), time.perf_counter()
                    _run(command, f"{run.label}: timing {engine} beam {beam}")
                    seconds.append(time.perf_counter() - started)
                    busy.append(beside.cores())
                found = score(list(read_lines(output)), references, [metric], str(output), str(test.ref))[metric]
                measurements.append(Measurement(engine, beam, len(lines), tuple(seconds), tuple(load), tuple(busy),
                                                score=found))  # fmt: skip
    machine = {**machine_record(torch.device("cpu")), "threads": spec.threads}
    return SpeedRecord(result.fingerprint, result.checkpoint, spec.settings(), machine, tuple(measurements))


@dataclass(frozen=True)
class Timed:
    """What :func:`time_finished` did to one run: a line to print; whether the run was timed in full with the machine
    to itself (an engine that cannot run the model counts as timed: it never will); whether a timing failed."""

    line: str
    alone: bool
    failed: bool = False


def time_finished(grid: Any, runs: list[Any], again: bool = False) -> list[Timed]:
    """Time every finished run of ``runs`` that lacks a current speed record (``again``: every finished run, its
    record replaced; ``--retime``), one after another with adlnmt training on the machine stopped; a failed timing
    is said and the others go on (the report is written all the same)."""
    from adlnmt.experiment.quiet import machine_alone
    from adlnmt.store import ModelDir

    spec = grid.speed
    test = next(t for t in grid.tests if t.name == spec.test)
    pending = [run for run in runs if run.result() is not None and (again or run_record(run, spec) is None)]
    here = [run for run in pending if ModelDir(run.model_dir).exists()]
    said = [Timed(f"speed of {run.label}: not timed, its model is not on this machine ({run.model_dir})", False)
            for run in pending if run not in here]  # fmt: skip
    with machine_alone():
        for run in here:
            run.archive_result()  # the record lies beside the archived result
            try:
                record = time_run(run, spec, test, grid.translate, grid.metrics[0])
            except UserError as err:
                said.append(Timed(f"speed of {run.label}: not timed: {err}", False, failed=True))
                continue
            record.save(run.archive / SPEED_FILE)
            timed = ", ".join(f"{m.engine} beam {m.beam} " + (f"{m.sentences_per_s:.1f} sent/s" if m.seconds
                              else f"not timed ({m.skipped})") + (" (beside other work)" if m.beside_others else "")
                              for m in record.measurements)  # fmt: skip
            said.append(Timed(f"speed of {run.label}: {timed}", not any(m.beside_others for m in record.measurements)))
    return said


# --- report --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One variant timed with one engine and beam on one processor: its runs' speeds (those taken alone) and the mean
    score of their timed outputs."""

    variant: str
    engine: str
    beam: int
    by_seed: dict[int, Measurement]
    processor: str = ""

    @property
    def score(self) -> float | None:
        """The mean of the grid's first metric over the timed outputs (None while a record predates their scores)."""
        scores = [m.score for m in self.by_seed.values()]
        return None if None in scores else statistics.mean(scores)  # type: ignore[arg-type]

    @property
    def seconds(self) -> list[float]:
        """The repeats of one timed run; of several, each run's median repeat: the run is the unit (its repeats
        share its session's conditions, so pooling them as independent overstated the interval's coverage)."""
        if len(self.by_seed) == 1:
            return list(next(iter(self.by_seed.values())).seconds)
        return [statistics.median(m.seconds) for m in self.by_seed.values()]

    @property
    def sentences_per_s(self) -> float:
        """Sentences per second at the median of :attr:`seconds`."""
        sentences = next(iter(self.by_seed.values())).sentences
        return sentences / statistics.median(self.seconds)


Records = dict[tuple[str, int], SpeedRecord]  # (variant, seed) → the run's current speed record


def timed_records(grid: Any, runs: list[Any]) -> Records:
    """The current speed record of each timed run (:func:`run_record`), read once."""
    return {(run.variant.name, run.seed): record for run in runs if (record := run_record(run, grid.speed))}


def points(grid: Any, records: Records) -> tuple[list[Point], list[str]]:
    """The timed (variant, engine, beam, processor) of the grid, in the grid's order, from the timings taken alone;
    and the runs whose timings were taken beside other work (more than ``BUSY_BESIDE_LIMIT`` cores busy in a repeat:
    left out, as the claims leave them out), e.g. "Transformer seed 1 (torch beam 1, …)"."""
    spec = grid.speed
    processors = sorted({record.processor for record in records.values()})
    found, beside = [], []
    for variant in grid.variants:
        timed = {seed: record for (name, seed), record in records.items() if name == variant.name}
        for seed, record in sorted(timed.items()):
            if busy := [f"{m.engine} beam {m.beam}" for m in record.measurements if m.seconds and m.beside_others]:
                beside.append(f"{variant.name} seed {seed} ({', '.join(busy)})")
        for engine in spec.engines:
            for beam in spec.beams:
                for processor in processors:
                    by_seed = {seed: m for seed, record in timed.items() if record.processor == processor
                               and (m := record.find(engine, beam)) is not None and m.seconds
                               and not m.beside_others}  # fmt: skip
                    if by_seed:
                        found.append(Point(variant.name, engine, beam, by_seed, processor))
    return found, beside


def pareto(found: list[Point]) -> list[Point]:
    """The points no other point beats in both speed and score (at least as good in both, better in one), fastest
    first (give it the points of one beam and one processor: speeds on two processors do not compare)."""
    scored = [p for p in found if p.score is not None]

    def beaten(p: Point) -> bool:
        return any(q.sentences_per_s >= p.sentences_per_s and q.score >= p.score  # type: ignore[operator]
                   and (q.sentences_per_s, q.score) != (p.sentences_per_s, p.score) for q in scored)  # fmt: skip

    return sorted((p for p in scored if not beaten(p)), key=lambda p: -p.sentences_per_s)


def panels(found: list[Point]) -> list[tuple[str, int]]:
    """The (processor, beam) groups of ``found``, each a panel of the plot and a Pareto frontier of its own."""
    return sorted({(p.processor, p.beam) for p in found})


def pareto_plot(grid: Any, found: list[Point], path: Path) -> Path:
    """The grid's first metric against sentences per second, one panel per beam (and processor, where the timings
    come from several), the Pareto frontier drawn."""
    from adlnmt.plotting import line_style, pyplot, save_figure

    plt = pyplot()
    groups = panels(found)
    several_processors = len({processor for processor, _ in groups}) > 1
    figure, axes = plt.subplots(1, len(groups), figsize=(5.2 * len(groups), 4.2), squeeze=False)
    series = sorted({(p.variant, p.engine) for p in found}, key=lambda s: [v.name for v in grid.variants].index(s[0]))
    several_engines = len({p.engine for p in found}) > 1
    for axis, (processor, beam) in zip(axes[0], groups, strict=True):
        here = [p for p in found if (p.processor, p.beam) == (processor, beam) and p.score is not None]
        for index, (variant, engine) in enumerate(series):
            for p in here:
                if (p.variant, p.engine) == (variant, engine):
                    label = f"{variant} ({engine})" if several_engines else variant
                    style = line_style(index, len(series))
                    axis.plot([p.sentences_per_s], [p.score], linestyle="none", label=label,
                              **{**style, "markersize": 7})  # fmt: skip
        front = pareto(here)
        if front:
            axis.step([p.sentences_per_s for p in front], [p.score for p in front], where="post", color="grey",
                      linewidth=1, alpha=0.7, label="Pareto frontier")  # fmt: skip
        axis.set_xscale("log")
        axis.set_title(f"beam {beam}" + (f"\n{processor}" if several_processors else ""), fontsize="medium")
        axis.set_xlabel(f"sentences/s ({grid.speed.test}, whole command, {grid.speed.threads} thread(s))")
        axis.set_ylabel(f"{grid.metrics[0]} of the timed output ({grid.speed.test})")
        axis.grid(alpha=0.3)
    legend = {}  # one legend for the panels, below them: inside a panel it hid points
    for axis in axes[0]:
        legend.update(zip(*reversed(axis.get_legend_handles_labels()), strict=True))
    figure.legend(list(legend.values()), list(legend), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                  ncol=min(4, len(legend)), fontsize="small")  # fmt: skip
    return save_figure(figure, path)


def speed_section(grid: Any, runs: list[Any], out: Path) -> list[str]:
    """The report's speed section (Markdown parts; none without a ``speed:`` section), ``speed.csv`` (every timing,
    those beside other work marked) and the plot (the timings taken alone, by processor)."""
    spec = grid.speed
    if spec is None:
        return []
    records = timed_records(grid, runs)
    _write_csv(grid, records, out / "speed.csv")
    found, beside = points(grid, records)
    parts = ["## Decoding speed (whole commands)"]
    if not found and not beside:
        return [*parts, f"No finished run timed yet (the runs are timed once they have all finished; {spec.repeats} "
                        "repeats each)."]  # fmt: skip
    several = len({p.processor for p in found}) > 1
    front = {(p.variant, p.engine, p.beam, p.processor) for group in panels(found)
             for p in pareto([q for q in found if (q.processor, q.beam) == group])}  # fmt: skip
    head = ["variant", "engine", "beam", *(["processor"] if several else []), grid.metrics[0], "sent/s",
            "median s [interval] (coverage)", "runs × repeats", "load (1 min)", "Pareto"]  # fmt: skip
    rows = [
        "| " + " | ".join(head) + " |",
        "|---|---|---:|" + ("---|" if several else "") + "---:|---:|---|---|---:|---|",
    ]
    for p in found:
        median, low, high, coverage = median_interval(p.seconds)
        loads = [x for m in p.by_seed.values() for x in m.load]
        score = f"{p.score:.2f}" if p.score is not None else "–"
        mark = "●" if (p.variant, p.engine, p.beam, p.processor) in front else ""
        cells = [p.variant, p.engine, str(p.beam), *([p.processor] if several else []), score,
                 f"{p.sentences_per_s:.1f}", f"{median:.2f} [{low:.2f}, {high:.2f}] ({coverage:.0%})",
                 f"{len(p.by_seed)} × {spec.repeats}", f"{statistics.mean(loads):.1f}", mark]  # fmt: skip
        rows.append("| " + " | ".join(cells) + " |")
    machines = {(r.processor, r.machine.get("threads")) for r in records.values()}
    skipped = sorted({f"{name} ({m.engine}: {m.skipped})" for (name, _), r in records.items()
                      for m in r.measurements if m.skipped})  # fmt: skip
    notes = [
        f"`adlnmt translate` on {f'the first {spec.lines} line(s)' if spec.lines else 'every line'} of {spec.test}, "
        f"timed from the start of the process to its end (loading included), {spec.precision}, {spec.threads} "
        f"thread(s){f' and {spec.workers} workers' if spec.workers > 1 else ''}, {spec.repeats} "
        f"repeats per run, runs timed one after another with adlnmt training on the machine stopped; machine(s): "
        + "; ".join(f"{processor}, {threads} thread(s)" for processor, threads in sorted(machines, key=str))
        + ". sent/s: sentences over the median repeat of the variant's one timed run on that processor, or over the "
        "median of its timed runs' median repeats (the run is the unit: a run's repeats share its session); the "
        "interval is of order statistics of those repeats (or run medians), with its coverage of the median. "
        f"{grid.metrics[0]}: of the timed output itself (the engine in {spec.precision}), the mean over the runs. "
        f"Pareto ●: no other variant and engine of that beam{' and processor' if several else ''} is at least as "
        "fast and as good. speed.csv has each run.",
    ]
    if several:
        notes.append("The timings come from several processors: each row holds one processor's, and speeds compare "
                     "only within one.")  # fmt: skip
    if beside:
        notes.append(f"Left out (timed with more than {BUSY_BESIDE_LIMIT} cores busy beside a repeat: other work on "
                     f"the machine; the claims leave them out too, speed.csv keeps them): {'; '.join(beside)}. "
                     "`--retime` with the machine otherwise idle times them again.")  # fmt: skip
    if skipped:
        notes.append("Not timed: " + "; ".join(skipped) + ".")
    if not found:
        return [*parts, " ".join(notes)]
    plot = pareto_plot(grid, found, out / "plots" / "speed-pareto.png")
    parts += ["\n".join(rows), " ".join(notes), f"![BLEU against speed](plots/{plot.name})"]
    if spec.claims:
        parts.append(f"The section's {len(spec.claims)} speed claim(s) are judged with the grid's other claims in "
                     "[claims.md](claims.md).")  # fmt: skip
    return parts


def _write_csv(grid: Any, records: Records, path: Path) -> None:
    """``speed.csv``: one line per run, engine and beam timed, with its processor and whether it was timed beside
    other work."""
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(["variant", "engine", "beam", "seed", "processor", "sentences", "median_s", "low_s", "high_s",
                     "coverage", "sentences_per_s", "load", "busy_beside_max", "beside_other_work",
                     grid.metrics[0]])  # fmt: skip
    order = [v.name for v in grid.variants]
    for (variant, seed), record in sorted(records.items(), key=lambda item: (order.index(item[0][0]), item[0][1])):
        for m in record.measurements:
            if not m.seconds:
                continue
            median, low, high, coverage = median_interval(list(m.seconds))
            busy = max((b for b in m.busy_beside if b is not None), default=None)
            numbers = [f"{median:.4f}", f"{low:.4f}", f"{high:.4f}", f"{coverage:.4f}", f"{m.sentences_per_s:.3f}",
                       f"{statistics.mean(m.load):.2f}", "" if busy is None else f"{busy:.2f}"]  # fmt: skip
            score = "" if m.score is None else f"{m.score:.2f}"
            writer.writerow([variant, m.engine, m.beam, seed, record.processor, m.sentences, *numbers,
                             "yes" if m.beside_others else "no", score])  # fmt: skip
    atomic_write(path, lambda tmp: tmp.write_text(table.getvalue(), encoding="utf-8"))
