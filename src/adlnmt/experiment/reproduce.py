"""Whether a run trained again (``adlnmt experiment --rerun``) reproduced the result it replaced.

``--rerun`` keeps the replaced archive in the run's folder (``RUN/replaced``) instead of deleting it; when the run
finishes, :func:`compare` says whether the two are the same run: the weights evaluated (their SHA-256, where both
recorded it), every checkpoint's training loss and validation perplexity, and every hypothesis of every test set.
A teacher trained again on a fresh machine teaches its students the same translations only if it is the same
(:mod:`adlnmt.experiment.distill_runs`); a result that moved is a finding about the toolkit's determinism. The new
result records what it replaced and the comparison (``result.json``'s ``rerun``). On the CPU a run reproduces on the
same processor model only (another may pick other vectorised kernels and round differently): :func:`processor_note`
says so before a rerun starts.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from adlnmt.data.corpus import read_lines
from adlnmt.errors import DataError, UserError
from adlnmt.experiment.results import RESULT_FILE, Machine, Provenance, Rerun, ResultError, RunResult, read_result
from adlnmt.store.atomic import atomic_write

REPLACED = "replaced"  # RUN/replaced: the archived folder a --rerun replaces, until the run finishes again
RERUN_MARK = "rerun.txt"  # ARCHIVE/rerun.txt: the run folder (another output folder) that trains it again, till then


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` found: the same training (weights, else training loss), every hypothesis the same (of
    the test sets both translated), and one line saying so or where they differ."""

    reproduced: bool
    same_hypotheses: bool
    line: str


def rerun_folder(run_dir: Path, archive: Path) -> Path | None:
    """Where the run is being trained again (``--rerun``) after it stopped before it finished: ``run_dir``, the
    archive (a grid that trains there), or another output folder's run named in the archive (``RERUN_MARK``); None
    when no rerun is pending (the archive holds a result). Such a run resumes there, with or without ``--rerun``, and
    is never replaced by a copy of another grid's result with the same settings: that is the result being checked."""
    if (archive / RESULT_FILE).is_file():
        return None
    for folder in (run_dir, archive):
        if (folder / REPLACED / RESULT_FILE).is_file():
            return folder
    mark = archive / RERUN_MARK
    return Path(mark.read_text(encoding="utf-8").strip()) if mark.is_file() else None


def rerun_elsewhere(run_dir: Path, archive: Path) -> Path | None:
    """The other folder where the run is being trained again (:func:`rerun_folder`), if not ``run_dir``."""
    folder = rerun_folder(run_dir, archive)
    return folder if folder is not None and folder.resolve() != run_dir.resolve() else None


def keep_replaced(archive: Path, run_dir: Path) -> bool:
    """Empty ``run_dir`` and ``archive`` (the same folder when a grid trains in its archive), keeping the archived
    run, if any, as ``run_dir``/replaced and naming ``run_dir`` in the archive (``RERUN_MARK``) for the grid's
    commands in other output folders. A rerun stopped before it finished in ``run_dir`` (:func:`rerun_folder`) is
    left as it is, to resume: True then. One pending in another folder is an error."""
    if (pending := rerun_folder(run_dir, archive)) is not None:
        if pending.resolve() == run_dir.resolve():
            return True
        raise UserError(f"{run_dir}: its run is being trained again in {pending} (stopped before it finished): "
                        f"resume it there (the same command with that --out), or delete that folder and "
                        f"{archive / RERUN_MARK} to train it again here")  # fmt: skip
    kept = run_dir.parent / f".{run_dir.name}.{REPLACED}"
    shutil.rmtree(kept, ignore_errors=True)
    if (archive / RESULT_FILE).is_file():
        shutil.move(archive, kept)
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(archive, ignore_errors=True)
    if kept.is_dir():
        run_dir.mkdir(parents=True)
        kept.rename(run_dir / REPLACED)
        if archive.resolve() != run_dir.resolve():
            archive.mkdir(parents=True, exist_ok=True)
            atomic_write(archive / RERUN_MARK, lambda tmp: tmp.write_text(f"{run_dir.resolve()}\n", encoding="utf-8"))
    return False


def processor_here(archived: RunResult, device: str) -> str | None:
    """The processor this machine would train ``archived``'s run on (``device``: a ``--device`` value), when it is not
    the one the run was evaluated on; None when it is."""
    from adlnmt.train.device import pick_device

    now = Machine.here(str(pick_device(device, 0))).processor
    return now if now != archived.provenance.machine.processor else None


def processor_note(archive: Path, label: str, device: str) -> str | None:
    """A warning, before ``label`` is trained again here on ``device`` (a ``--device`` value), when its archived result
    in ``archive`` was evaluated on another processor (so it will likely not reproduce); None when it was this one, or
    there is none."""
    archived = read_result(archive / RESULT_FILE)
    if archived is None or (now := processor_here(archived, device)) is None:
        return None
    return (
        f"warning: {label} was evaluated on {archived.provenance.machine.processor}, this machine trains it on {now}: "
        "another processor may round differently (other vectorised kernels), so it will likely not reproduce its "
        "archived result bit for bit (docs/training.md)"
    )


def report_replaced(run_dir: Path, folder: Path, same_settings: Callable[[RunResult], bool]) -> str | None:
    """:func:`compare` of the run's replaced result (then removed) with its new one in ``folder``, recorded in the new
    ``result.json`` (``rerun``); None when the run replaced none. ``same_settings`` says whether a result is the run's
    (:meth:`~adlnmt.experiment.runner.Run.matches`: its fingerprint, or an earlier one the run still answers to, e.g.
    that of a result shared from another grid under a lower update cap); one that is not is not compared."""
    replaced = run_dir / REPLACED
    if not replaced.is_dir():
        return None
    try:
        before, after = RunResult.load(replaced / RESULT_FILE), RunResult.load(folder / RESULT_FILE)
    except (OSError, ResultError) as err:
        line = f"not compared with the replaced result ({err})"
    else:
        if not same_settings(before):
            line = "not compared: the replaced result had other settings (another fingerprint)"
        else:
            found = compare(before, replaced, after, folder)
            line = found.line
            rerun = Rerun(replaced_machine=before.provenance.machine, replaced_code=before.provenance.code,
                          replaced_weights_sha256=before.provenance.weights_sha256,
                          replaced_weights_digest=before.provenance.weights_digest, reproduced=found.reproduced,
                          same_hypotheses=found.same_hypotheses, comparison=line)  # fmt: skip
            replace(after, rerun=rerun).save(folder / RESULT_FILE)
    shutil.rmtree(replaced)
    return line


def _lines(folder: Path, relative: str) -> list[str] | None:
    """The hypotheses of a run's file, one a line (split on ``\\n`` only: a U+2028 inside a sentence is no break),
    or None where the file cannot be read as UTF-8 text."""
    try:
        return list(read_lines(folder / relative))
    except DataError:
        return None


CURVE_NAMES = {"train_loss": "the training loss", "valid_ppl": "the validation perplexity"}


def _curve_difference(before: RunResult, after: RunResult, name: str) -> str | None:
    """Where the two curves' ``name`` (a key of ``CURVE_NAMES``) first differs, or their checkpoints (said for the
    training loss only); None when they do not."""
    for old, new in zip(before.curve, after.curve, strict=False):
        if old.update != new.update:
            return f"checkpoints at update {old.update} before, {new.update} now" if name == "train_loss" else None
        if (was := getattr(old, name)) != (now := getattr(new, name)):
            return f"{CURVE_NAMES[name]} first differs at update {old.update}: {was} → {now}"
    if len(before.curve) != len(after.curve) and name == "train_loss":
        return f"{len(before.curve)} checkpoints before, {len(after.curve)} now"
    return None


def _hypotheses_difference(before: RunResult, replaced: Path, after: RunResult, folder: Path) -> tuple[list[str], int]:
    """(what differs in the hypotheses of the test sets both translated, how many sentences those have)."""
    differences, same, total = [], 0, 0
    for name in sorted(before.tests.keys() & after.tests.keys()):
        old = _lines(replaced, before.tests[name].hypotheses)
        new = _lines(folder, after.tests[name].hypotheses)
        if old is None or new is None or len(old) != len(new):
            differences.append(f"{name}: hypotheses not comparable")
            continue
        same += sum(a == b for a, b in zip(old, new, strict=True))
        total += len(old)
    if same != total:
        differences.append(f"hypotheses: {same:,} of {total:,} the same")
    return differences, total


def same_weights(before: Provenance, after: Provenance) -> bool | None:
    """Whether two runs evaluated the same weights: by their tensors' digests where both recorded one; else the
    same file (SHA-256) says yes, and other files say nothing (the same weights are written with their metadata in no
    fixed order, and since 2026-12-02 with the name of the model); None: not known."""
    if before.weights_digest is not None and after.weights_digest is not None:
        return before.weights_digest == after.weights_digest
    if before.weights_sha256 is not None and before.weights_sha256 == after.weights_sha256:
        return True
    return None


def compare(before: RunResult, replaced: Path, after: RunResult, folder: Path) -> Comparison:
    """Whether the result ``after`` (archived in ``folder`` with its hypotheses) reproduces ``before`` (in
    ``replaced``; a result of the same run's settings), and one line saying so or where they differ (and on which
    processors, where those differ).

    Reproduced means the same training: the same weights evaluated where that is known (:func:`same_weights`), else
    the same training loss at every checkpoint, to the last bit. Validation perplexity and hypotheses come from the
    evaluation code as well, which may have changed between the two (validation batching, search): where only they
    differ, the run is reproduced and its evaluation is said to differ, with both commits."""
    weights = same_weights(before.provenance, after.provenance)
    loss = _curve_difference(before, after, "train_loss")
    trained = [loss] if loss else []
    if weights is False:
        trained.insert(0, "other weights (SHA-256)")
    same_training = weights if weights is not None else not trained
    ppl = _curve_difference(before, after, "valid_ppl")
    hypotheses, sentences = _hypotheses_difference(before, replaced, after, folder)
    evaluated = ([ppl] if ppl else []) + hypotheses
    processors = before.provenance.machine.processor, after.provenance.machine.processor
    where = f" (evaluated on {processors[0]} before, on {processors[1]} now)" if len(set(processors)) > 1 else ""
    if not same_training:
        return Comparison(False, not hypotheses, "not reproduced: " + "; ".join(trained + evaluated) + where)
    known = weights is not None
    if evaluated:
        basis = "the same weights (SHA-256)" if known else f"the same training loss at {len(after.curve)} checkpoints"
        commits = [(code.git_commit or "?")[:7] for code in (before.provenance.code, after.provenance.code)]
        return Comparison(True, not hypotheses, f"reproduced: {basis}; evaluated differently ({'; '.join(evaluated)}; "
                          f"code {commits[0]} before, {commits[1]} now){where}")  # fmt: skip
    return Comparison(True, True, f"reproduced: {'the same weights (SHA-256), ' if known else ''}the same "
                      f"{len(after.curve)} checkpoints (training loss, validation perplexity) and hypotheses "
                      f"({sentences:,} sentences of {len(after.tests)} test sets){where}")  # fmt: skip
