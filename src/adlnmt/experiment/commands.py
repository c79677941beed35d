"""CLI: ``adlnmt experiment GRID.yaml [--scale S] [--out DIR] [--jobs N] [--threads T] [--device D]`` and
``adlnmt verdicts [ARCHIVE ...] [--page docs/reproductions.md [--check]]``."""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from adlnmt.errors import UserError

if TYPE_CHECKING:  # the grid and runner import PyTorch and sacreBLEU: not needed to parse the arguments
    from adlnmt.experiment.folders import Folders
    from adlnmt.experiment.grid import Grid
    from adlnmt.experiment.runner import Outcome, Run

# the last line of a --retime that timed every selected run again, alone (experiments/lane.sh looks for it)
RETIMED_IN_FULL = "--retime: every selected run timed again, alone"


def status(run: Run, shared: dict[str, str]) -> str:
    from adlnmt.experiment.reproduce import rerun_folder

    if (folder := run.finished_in()) is not None:
        return "finished" + (" (archived)" if folder != run.dir else "")
    if run.fingerprint in shared:
        return f"finished as {shared[run.fingerprint]} (shared)"
    rerun = rerun_folder(run.dir, run.archive)
    if rerun is not None and rerun.resolve() != run.dir.resolve():
        return f"trained again in {rerun} (not here)"
    if (why := run.other_settings()) is not None:
        return f"started with other settings ({why}): not run; --rerun trains it again with these"
    again = " as a rerun (its replaced result kept)" if rerun is not None else ""
    if not run.model_dir.exists():
        return "to be trained again here (its replaced result kept)" if again else "new"
    from adlnmt.store import ModelDir

    states = ModelDir(run.model_dir).states()
    return f"started{again} (resumes at update {states[-1][0]})" if states else f"started{again}"


def where(folders: Folders) -> str:
    """The output folder, or both folders of the two-folder layout."""
    return f"output {folders.work}" + ("" if folders.one else f", archive and report {folders.archive}")


def planned(run: Run, shared: dict[str, str], selected: list[Run], retrained: list[Run], teachers: list[Run],
            only: str | None, rerun: str) -> str:  # fmt: skip
    """A run's state in the plan, and what this command does to it: trains it again (``rerun``, the option given:
    its finished result replaced once the new one is compared with it), trains it first as the unfinished teacher
    of selected students (``teachers``), times or scores it again if finished (``only``: --retime, --score-added,
    which train nothing), or leaves it alone (not selected)."""
    state = status(run, shared)
    if run in teachers:
        return f"{state} (not selected, but trained first: the selected students learn from it)"
    if run not in selected:
        return f"{state} (not selected)"
    if only is not None:
        if run.finished_in() is None:
            return f"{state} (not finished: {only} trains nothing)"
        return f"{state}, {'timed again' if only == '--retime' else 'scored on the added test sets'} ({only})"
    return f"{state}, trained again ({rerun})" if run in retrained and run.finished_in() is not None else state


def print_plan(grid: Grid, runs: list[Run], folders: Folders, shared: dict[str, str], selected: list[Run],
               retrained: list[Run], only: str | None = None, rerun: str = "--rerun") -> None:  # fmt: skip
    """The grid's runs and their state, marking those this command (``--variants``, ``--seeds``, ``rerun``: --rerun
    or --rerun-before DATE) trains again or leaves alone, or (``only``: --retime, --score-added) times or scores
    again."""
    print(f"{grid.path}: {grid.name}, scale {grid.scale or '-'}: {len(grid.variants)} variants × "
          f"{len(grid.seeds)} seeds {list(grid.seeds)}, {where(folders)}")  # fmt: skip
    tests = ", ".join(t.name for t in grid.tests)
    print(f"  tests {tests}; metrics {', '.join(grid.metrics)}; translate {grid.translate}")
    teachers: list[Run] = []
    if grid.distill is not None and only is None:
        from adlnmt.experiment.distill_runs import teachers_added

        teachers = teachers_added([run for run in selected if run.result() is None], runs)
    if len(selected) < len(runs):
        but = f", but for {len(teachers)} teacher(s) of selected students, trained first" if teachers else ""
        print(f"  selected: {len(selected)} of {len(runs)} runs (--variants, --seeds); the others are left alone{but}")
    if again := sum(run.finished_in() is not None for run in retrained):
        print(f"  {rerun}: {again} finished run(s) trained again, each result kept (replaced/) until the new one is "
              "compared with it")  # fmt: skip
    for variant in grid.variants:
        states = ", ".join(f"seed {r.seed} {planned(r, shared, selected, retrained, teachers, only, rerun)}"
                           for r in runs if r.variant is variant)  # fmt: skip
        print(f"  {variant.name} [runs/{variant.slug}, data {variant.data.prepared or variant.data.key}]: {states}")
        print("    " + ", ".join(f"{key}={value}" for key, value in variant.train.items()))
    if (step := grid.distill) is not None:
        from adlnmt.experiment.distill_runs import step_state, teacher_of

        data_dirs = {key: folders.work / "data" / key for key in (step.key, grid.variant(step.teacher).data.key)}
        standing = [run for run in runs if run not in retrained]  # --rerun sets the others' results aside first
        print(f"  distillation {step.key}: {step_state(step, teacher_of(step, runs), data_dirs, standing)}")


def select(grid: Grid, runs: list[Run], variants: str | None, seeds: str | None) -> list[Run]:
    """The runs of the variants (names or directory names) and seeds given, checked against the grid. A flag given
    an empty list (or an empty item, e.g. an unset shell variable) is an error: it never means "all" (with --rerun
    that would delete every finished run)."""
    for flag, given in (("--variants", variants), ("--seeds", seeds)):
        if given is not None and not all(item.strip() for item in given.split(",")):
            item = "name" if flag == "--variants" else "seed"
            raise UserError(f"{flag} {given!r}: an empty {item} in the list (an unset shell variable?); leave {flag} "
                            "out to select every one")  # fmt: skip
    names = [n.strip() for n in variants.split(",")] if variants is not None else None
    known = {v.name: v.name for v in grid.variants} | {v.slug: v.name for v in grid.variants}
    if names is not None and (unknown := [n for n in names if n not in known]):
        at_scale = f" at scale {grid.scale}" if grid.scale else ""
        raise UserError(f"--variants: {', '.join(unknown)} not in {grid.path}{at_scale} (variants: "
                        f"{', '.join(v.name for v in grid.variants)})")  # fmt: skip
    if names is not None:
        _refuse_repeats("--variants", variants, [known[n] for n in names], "variant")
    try:
        numbers = [int(s) for s in seeds.split(",")] if seeds is not None else None
    except ValueError:
        raise UserError(f"--seeds expects comma-separated integers, got {seeds!r}") from None
    if numbers is not None and (unknown_seeds := [n for n in numbers if n not in grid.seeds]):
        raise UserError(f"--seeds: {unknown_seeds} not among the grid's seeds {list(grid.seeds)}")
    if numbers is not None:
        _refuse_repeats("--seeds", seeds, numbers, "seed")
    return [run for run in runs if (names is None or {run.variant.name, run.variant.slug} & set(names))
            and (numbers is None or run.seed in numbers)]  # fmt: skip


def _refuse_repeats(flag: str, given: str | None, items: Sequence[str | int], item: str) -> None:
    """A ``flag`` list that names one ``item`` twice (``--seeds 1,1``; a variant by its name and its directory name)
    is an error: a slip of the command line (another item meant?), never silently run once."""
    if repeated := [str(i) for i in dict.fromkeys(items) if items.count(i) > 1]:
        raise UserError(f"{flag} {given!r}: {item} {', '.join(repeated)} given more than once; name each {item} once")


def rerun_before(given: str | None) -> datetime | None:
    """``--rerun-before DATE``: a moment in the past (ISO 8601; UTC when it names no zone)."""
    if given is None:
        return None
    try:
        moment = datetime.fromisoformat(given)
    except ValueError:
        raise UserError(f"--rerun-before {given!r}: not an ISO 8601 date and time, e.g. 2026-11-30T05:00Z") from None
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    if moment > datetime.now(UTC):
        raise UserError(f"--rerun-before {given}: in the future, so the runs it trains again would be trained again "
                        "each time the command runs; give the moment the runs to replace were made before")  # fmt: skip
    return moment


def to_train_again(selected: list[Run], everyone: bool, before: datetime | None) -> list[Run]:
    """The selected runs ``--rerun`` (``everyone``) or ``--rerun-before`` trains again: with the latter, those whose
    result was evaluated before ``before`` (a run it trained since is not trained a second time)."""
    if everyone or before is None:
        return selected if everyone else []
    return [run for run in selected if (result := run.result()) is not None and result.evaluated < before]


def cmd_experiment(args: argparse.Namespace) -> int:
    from adlnmt.experiment import slurm
    from adlnmt.experiment.checks import check_input_files, check_speed_machine, unreadable_results
    from adlnmt.experiment.folders import claim, output_folders
    from adlnmt.experiment.grid import load_grid
    from adlnmt.experiment.judge import write_claims
    from adlnmt.experiment.lock import lock_output
    from adlnmt.experiment.report import write_report
    from adlnmt.experiment.reproduce import keep_replaced, processor_note
    from adlnmt.experiment.retime import retime
    from adlnmt.experiment.runner import check_inputs, plan_runs, shared_runs
    from adlnmt.experiment.score_added import score_added

    if args.pilot and not args.power:
        raise UserError("--pilot names the pilot grids of --power; give --power too")
    before = rerun_before(args.rerun_before)
    check_one_mode(args)
    if args.executor != "slurm" and (given := slurm_flags_given(args)):
        raise UserError(f"{', '.join(given)}: SLURM job options, read with --executor slurm only (the local executor "
                        "would ignore them); give --executor slurm, or leave them out")  # fmt: skip
    grid = load_grid(args.grid, args.scale)
    folders = output_folders(grid, args.out, args.results)
    if folders.note:
        print(folders.note)
    results = folders.archive
    runs = plan_runs(grid, folders.work, results)
    selected = select(grid, runs, args.variants, args.seeds)
    retrained = to_train_again(selected, args.rerun, before)
    shared = [found for found in shared_runs(grid, runs, results) if found[0] not in retrained]
    adopted = [run for run, _, _ in shared]
    if args.power:
        from adlnmt.experiment.power import power_table

        print(power_table(grid, args.pilot))
        return 0
    for line in unreadable_results(runs):
        print(f"warning: {line}: counted as not finished, left out of the report")
    if args.dry_run:
        only = "--retime" if args.retime else "--score-added" if args.score_added else None
        rerun = f"--rerun-before {args.rerun_before}" if args.rerun_before else "--rerun"
        found = {run.fingerprint: name for run, _, name in shared}
        print_plan(grid, runs, folders, found, selected, retrained, only, rerun)
        check_input_files(grid)
        check_inputs(grid)  # what the real run checks before it trains: test sets' line counts, contrastive suites
        check_speed_machine(grid)
        return 0
    if args.status:
        print(f"{grid.name} (scale {grid.scale or '-'}), {where(folders)}:")
        slurm.print_status(selected)
        return 0
    if not (args.report_only or args.score_added):  # this command times decoding once its runs have trained
        check_speed_machine(grid)
    if args.report_only and not shared and not any(run.finished_in() for run in runs):  # before any folder is made
        raise UserError(f"{results}: no finished run of this experiment (give --results, or run the grid first)")
    if (args.retime or args.score_added) and not any(run.finished_in() or run in adopted for run in selected):
        doing = "time again" if args.retime else "score on the added test sets"  # before any folder is made too
        raise UserError(f"{results}: none of the selected runs has finished: nothing to {doing} (run them first)")
    with lock_output(folders.work):  # released when the command ends, however it ends (also called in-process)
        claim(folders, grid)
        outcomes: list[Outcome] = []
        for run in runs:  # results of runs finished before the archive existed, or by an interrupted command
            run.archive_result()
            if (line := run.compare_rerun()) is not None:  # e.g. a SLURM job's, submitted without --wait
                print(f"{run.label} trained again: {line}")
        for run, folder, name in shared:
            run.adopt(folder, name)
            print(f"{run.label}: finished as {name} (the same settings), copied into {run.archive}")
        for run in retrained:  # the archived result kept until the new one is compared with it
            if args.executor == "local" and (note := processor_note(run.archive, run.label, args.device)):
                print(note)
            if keep_replaced(run.archive, run.dir):
                print(f"{run.label}: resuming its rerun, stopped before it finished (the replaced result is kept "
                      "until the two are compared)")  # fmt: skip
        untimed = 0  # --retime: selected runs not timed again in full, alone (a lane times such a line again)
        timing_failed = 0  # whole-command timings that failed: said, the report written, the command's status 1
        if args.retime or args.score_added:
            finished = [run for run in selected if run.finished_in() is not None]
            for run in finished:
                if args.retime:
                    timed = retime(run)
                    print(timed.line, flush=True)
                    untimed += not timed.alone
                else:
                    print(score_added(grid, run), flush=True)
            if unfinished := len(selected) - len(finished):
                print(f"{unfinished} of the selected runs not finished: not {'timed' if args.retime else 'scored'}")
                untimed += unfinished
        elif not args.report_only:
            outcomes = run_selected(grid, selected, folders.work, args, runs)
            if args.executor == "slurm" and not args.wait:
                return 0  # submitted: --status follows the jobs, --report-only (or --wait) reports
        if grid.speed is not None and not (args.report_only or args.score_added):  # every selected run has ended
            from adlnmt.experiment.speed import time_finished

            if any(outcome.stopped for outcome in outcomes):  # a stop signal ends the command, not its timings
                print("stopped by a signal: no decoding timed; re-run the same command to time the finished runs")
            else:
                for timed in time_finished(grid, selected, again=args.retime):
                    print(timed.line, flush=True)
                    untimed += not timed.alone
                    timing_failed += timed.failed
        if args.retime:
            print(RETIMED_IN_FULL if not untimed else f"--retime: {untimed} timing(s) not taken in full or not alone "
                  "(the lines above say why): run it again once they can be")  # fmt: skip
        if not any(run.finished_in() for run in runs):  # nothing to report: leave the archive as it was
            print(f"no finished run yet, so no report in {results}")
            return exit_status(outcomes)
        results.mkdir(parents=True, exist_ok=True)
        table = write_report(grid, runs, results)
        if judgements := write_claims(grid, runs, results):
            verdicts = [j.verdict for j in judgements]
            counts = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))
            print(f"claims: {counts} ({results / 'claims.md'})")
        print(f"\n{table}\n\nreport: {results / 'report.md'}  (tables: results.md, results.csv, runs.csv; plots/)")
        return exit_status(outcomes) or (1 if timing_failed else 0)


def run_selected(grid: Grid, selected: list[Run], out: Path, args: argparse.Namespace, runs: list[Run]
                 ) -> list[Outcome]:  # fmt: skip
    """Prepare the data, write every selected run's spec and run the unfinished ones (a grid's distillation step
    between its teacher and its students: :mod:`adlnmt.experiment.distill_runs`)."""
    from adlnmt.experiment import slurm
    from adlnmt.experiment.reproduce import rerun_elsewhere
    from adlnmt.experiment.runner import (
        Outcome,
        check_inputs,
        distillations,
        execute,
        prepare_data,
        running_order,
        write_spec,
    )

    check_inputs(grid)
    data_dirs = prepare_data(grid, out)
    options = slurm.slurm_options(grid, args) if args.executor == "slurm" else None
    threads = args.threads or (options.cpus if options else max(1, (os.cpu_count() or 1) // args.jobs))
    taught = distillations(runs)

    def write(run: Run) -> None:
        key = run.variant.data.key
        write_spec(grid, run, data_dirs[key], args.device, threads, taught.get(key))

    refused = [(run, why) for run in selected if run.result() is None and (why := run.other_settings())]
    for run, why in refused:  # its spec is left as it is: the settings its model was trained with
        print(f"FAILED {run.label}: not run: {run.dir} holds a model trained with other settings ({why}) than the "
              "grid gives this run now; put them back to resume it, or train it again with these (--rerun, with "
              "--variants and --seeds to pick it)")  # fmt: skip
    selected = [run for run in selected if all(run is not other for other, _ in refused)]
    for run in selected:
        write(run)
    elsewhere = {run.label: folder for run in selected if (folder := rerun_elsewhere(run.dir, run.archive))}
    for label, folder in elsewhere.items():
        print(f"{label}: being trained again in {folder} (stopped before it finished): not trained here; resume it "
              "with the command that trains there")  # fmt: skip
    pending = running_order(run for run in selected if run.result() is None and run.label not in elsewhere)
    resumed = sum(run.resumable for run in pending)
    finished = len(selected) - len(pending) - len(elsewhere)
    teachers = []
    if grid.distill is not None:
        from adlnmt.experiment.distill_runs import teachers_added

        teachers = teachers_added(pending, runs)
    first = f" and {len(teachers)} teacher(s) of them first (not selected)" if teachers else ""
    print(f"{grid.name} (scale {grid.scale or '-'}): {len(selected)} runs, {finished} finished "
          f"(skipped), {len(pending)} to run{first} ({resumed} resumed first), "
          f"{'as SLURM jobs' if options else f'{args.jobs} at a time'} with {threads} thread(s) each; output {out}",
          flush=True)  # fmt: skip
    failed = [Outcome(run, 1, 0.0, None) for run, _ in refused]
    if grid.distill is not None:  # the teacher, its distillation, its students, in that order
        from adlnmt.experiment import distill_runs

        return failed + distill_runs.run_in_order(grid, pending, runs, out, data_dirs, write, args, options, threads)
    if options is not None:
        on_slurm = slurm.submit(grid, pending, out, options, threads)
        return failed + (slurm.wait(on_slurm) if args.wait else [])
    return failed + execute(pending, args.jobs, threads, decode_alone=not args.decode_beside_training)


SHOWING = {"--power": "prints a power table", "--status": "shows the runs' SLURM jobs",
           "--report-only": "rebuilds the report", "--dry-run": "prints the plan"}  # fmt: skip
"""The flags that make ``adlnmt experiment`` show something instead of training (what each does)."""
CHANGING = ("--rerun", "--rerun-before", "--retime", "--score-added")
"""The flags that change finished runs (train, time or score them again)."""


def check_one_mode(args: argparse.Namespace) -> None:
    """A UserError for two of :data:`SHOWING` or of :data:`CHANGING` together, or a change with a flag that shows
    (the plan of a change excepted: ``--dry-run``), which one of the two would ignore."""

    def given(flags: Iterable[str]) -> list[str]:
        return [flag for flag in flags if getattr(args, flag[2:].replace("-", "_")) not in (None, False)]

    shows, changes = given(SHOWING), given(CHANGING)
    for group in (shows, changes):
        if len(group) > 1:
            raise UserError(f"{' and '.join(group)}: give one of them at a time")
    if shows and changes and shows != ["--dry-run"]:
        raise UserError(f"{shows[0]} {SHOWING[shows[0]]} and changes no run: it does not go with {changes[0]}")


def exit_status(outcomes: list[Outcome]) -> int:
    """0, or 1 when a run failed; after a stop signal 0 (SIGTERM) or 130 (SIGINT), saying how to resume."""
    from adlnmt.experiment.runner import STOPPED

    failed = [o.run for o in outcomes if not o.ok and not o.stopped]
    if failed:
        print(f"{len(failed)} run(s) failed: {', '.join(run.label for run in failed)}; "
              "re-run the same command to resume them")  # fmt: skip
    stopped = [o for o in outcomes if o.stopped and not o.ok]
    if stopped:
        print(f"stopped by a signal: {len(stopped)} run(s) not finished; re-run the same command to resume them")
    interrupted = any(o.returncode in (STOPPED["SIGINT"], -signal.SIGINT) for o in outcomes if o.stopped)
    return 1 if failed else STOPPED["SIGINT"] if interrupted else 0


def cmd_verdicts(args: argparse.Namespace) -> int:
    from adlnmt.store.atomic import write_text_atomic
    from adlnmt.verdicts.page import default_archives, rebuild_page, verdict_table

    if args.check and args.readme is None:
        raise UserError("--check compares a page's tables with the archives: give the page, --page PAGE")
    archives = [Path(a) for a in args.archives] or default_archives(Path("experiments/results"))
    seen: dict[Path, Path] = {}
    for archive in archives:
        if (first := seen.setdefault(archive.resolve(), archive)) is not archive:
            raise UserError(f"{first} and {archive}: the same archive named twice (its claims would be listed twice)")
    if args.readme is None:
        if not archives:
            raise UserError("no archive with claims.json under experiments/results; give archive directories")
        print(verdict_table(archives, Path.cwd()))
        return 0
    readme = Path(args.readme)
    try:
        text = readme.read_text(encoding="utf-8")
    except OSError as err:
        raise UserError(f"{readme}: cannot read ({err.strerror})") from None
    updated = rebuild_page(text, archives, readme)
    if args.check:
        if updated != text:
            print(f"{readme}: its tables are out of date; rebuild them with adlnmt verdicts --page {readme}")
            return 1
        print(f"{readme}: its tables match {len(archives)} archive(s)")
        return 0
    write_text_atomic(readme, updated)
    print(f"{readme}: tables rebuilt from {', '.join(str(a) for a in archives) or 'no archive'}")
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def add_commands(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "experiment",
        help="train, translate and score a grid of variants × seeds; results table, plots, report (resumable)",
        description="Run every (variant, seed) of a grid file as its own training + translation + scoring run, "
        "then write results.md/.csv (mean ± std over seeds), plots and report.md. Re-running skips finished runs "
        "and resumes interrupted ones. Grid format: docs/experiments.md.",
    )
    parser.add_argument("grid", help="grid file (YAML)")
    parser.add_argument("--scale", help="one of the grid's scales, e.g. small or full (default: its default_scale)")
    parser.add_argument(
        "--out",
        help="the grid's folder: prepared data, runs (weights, logs, TensorBoard events), their results and the "
        "report; its .gitignore leaves the archive to commit (default: results/NAME-SCALE next to the grid file; a "
        "grid begun before one folder per grid keeps its two folders: docs/experiments.md)",
    )
    parser.add_argument(
        "--results",
        help="archive the finished runs (results, hypotheses) and write the report here, apart from the data and "
        "weights in --out, e.g. into the checkout you commit from (default: the --out folder)",
    )
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="delete the selected runs (trained and archived) first and train them again (not copied from "
        "another experiment's archive either), saying whether each reproduced the result it replaced",
    )
    parser.add_argument(
        "--rerun-before",
        metavar="DATE",
        help="like --rerun, for the selected runs evaluated before DATE (ISO 8601, UTC by default, e.g. "
        "2026-11-30T05:00Z) only: run again (a lane started again), the command trains none of them twice",
    )
    parser.add_argument("--jobs", type=_positive, default=1, help="runs at once, each its own process (default 1)")
    parser.add_argument("--threads", type=_positive, help="torch threads per run (default: CPU cores / jobs)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto: a GPU if any)")
    parser.add_argument("--variants", help="run only these variants (comma-separated names); the report has all")
    parser.add_argument("--seeds", help="run only these seeds (comma-separated), e.g. 1")
    parser.add_argument("--dry-run", action="store_true", help="check the grid, list the runs and their state")
    parser.add_argument(
        "--power",
        action="store_true",
        help="before the runs: each claim's minimum detectable effect with the grid's seeds, planned from pilot rows "
        "(other grids' finished runs on the same test set), and whether a margin claim is decidable at this size",
    )
    parser.add_argument(
        "--pilot",
        action="append",
        metavar="GRID[@SCALE]",
        help="with --power: a grid whose finished runs are the pilot (repeatable; default: every other grid file "
        "next to GRID, at every scale)",
    )
    parser.add_argument(
        "--decode-beside-training",
        action="store_true",
        help="translate the test sets without stopping the other runs, or other grids' training on this machine "
        "(faster on a GPU; the speeds are then taken beside their training, recorded as such, and --retime can "
        "measure them again)",
    )
    parser.add_argument("--report-only", action="store_true", help="only rebuild tables, plots and report.md")
    parser.add_argument(
        "--retime",
        action="store_true",
        help="measure the decoding speed of the selected finished runs again on this machine, one after another "
        "(the test sets' speed columns and the speed: section's whole commands; their weights must be here; adlnmt "
        "training on the machine is stopped meanwhile, nothing else is), then rebuild the report",
    )
    parser.add_argument(
        "--score-added",
        action="store_true",
        help="score the selected finished runs on the test sets and metrics of the grid's added_evaluation that they "
        "lack: metrics from their archived hypotheses, test sets translated with their weights where these are here "
        "and translate an archived test set as archived (adlnmt training on the machine is stopped meanwhile), then "
        "rebuild the report",
    )
    add_slurm_arguments(parser)
    parser.set_defaults(func=cmd_experiment)

    verdicts = commands.add_parser(
        "verdicts",
        help="the table of every judged claim (claims.json of the archived grids), printed or put into the docs",
        description="Collect the claims judged by adlnmt experiment (ARCHIVE/claims.json) into one Markdown table: "
        "printed, or written between the verdict markers of a Markdown page (docs/reproductions.md), with, where the "
        "page has progress markers, each grid's finished runs of those planned (ARCHIVE/results.csv).",
    )
    verdicts.add_argument("archives", nargs="*", help="archive directories (default: experiments/results/*/)")
    verdicts.add_argument(
        "--page",
        "--readme",
        dest="readme",
        metavar="PAGE",
        help="replace the tables between the verdict (and progress) markers of this Markdown file "
        "(docs/reproductions.md)",
    )
    verdicts.add_argument("--check", action="store_true", help="with --page: exit 1 if its tables are out of date")
    verdicts.set_defaults(func=cmd_verdicts)


def add_slurm_arguments(parser: argparse.ArgumentParser) -> None:
    """The executor's flags of ``adlnmt experiment`` (:mod:`adlnmt.experiment.slurm`)."""
    group = parser.add_argument_group(
        "on a SLURM cluster (--executor slurm; defaults from the grid file's slurm: section)"
    )
    group.add_argument("--executor", choices=("local", "slurm"), default="local",
                       help="local: worker processes on this machine (--jobs at a time); slurm: one SLURM job per run, "
                       "submitted with submitit (default local)")  # fmt: skip
    group.add_argument("--status", action="store_true",
                       help="show every run's state (pending, queued, running, finished, failed with its log, "
                       "cancelled) and exit")  # fmt: skip
    slurm_only = [  # what the local executor does not read: refused without --executor slurm (slurm_flags_given)
        group.add_argument("--wait", action="store_true", help="with --executor slurm: wait for the jobs, then report"),
        group.add_argument("--partition", dest="slurm_partition", help="SLURM partition"),
        group.add_argument("--time", dest="slurm_time", help="time limit per run: minutes or D-HH:MM:SS (default 120)"),
        group.add_argument("--gpus", dest="slurm_gpus", type=int, help="GPUs per run (default 0)"),
        group.add_argument("--cpus", dest="slurm_cpus", type=int, help="CPUs per run, its torch threads (default 1)"),
        group.add_argument("--mem", dest="slurm_mem", help="memory per run, e.g. 16G"),
        group.add_argument("--account", dest="slurm_account", help="SLURM account to charge"),
        group.add_argument("--qos", dest="slurm_qos", help="SLURM quality of service"),
        group.add_argument("--sbatch", action="append", metavar="OPTION=VALUE",
                           help="a further sbatch option for every job, e.g. constraint=a100 (repeatable)"),
    ]  # fmt: skip
    parser.set_defaults(slurm_only=tuple((action.option_strings[0], action.dest) for action in slurm_only))


def slurm_flags_given(args: argparse.Namespace) -> list[str]:
    """The flags given that only ``--executor slurm`` reads (the local executor would ignore them)."""
    return [flag for flag, dest in args.slurm_only if getattr(args, dest) not in (None, False)]
