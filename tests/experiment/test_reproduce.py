"""Whether a run trained again reproduced the result it replaced (:mod:`adlnmt.experiment.reproduce`)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from adlnmt.errors import UserError
from adlnmt.experiment.reproduce import (
    REPLACED,
    RERUN_MARK,
    Comparison,
    compare,
    keep_replaced,
    processor_note,
    report_replaced,
    rerun_elsewhere,
    rerun_folder,
)
from adlnmt.experiment.results import RESULT_FILE, Machine, Provenance, RunResult

from .sample_results import machine, run_result

HYPOTHESES = ["a man walks .", "two dogs run .", "a girl sings ."]


def archived(folder: Path, result: RunResult, hypotheses: list[str]) -> Path:
    (folder / "hyp").mkdir(parents=True)
    (folder / "hyp" / "test.txt").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    result.save(folder / RESULT_FILE)
    return folder


def same_fingerprint(result: RunResult) -> bool:
    """Stands in for ``Run.matches`` of the run whose fingerprint :func:`run_result` gives."""
    return result.fingerprint == run_result().fingerprint


def with_weights(result: RunResult, digest: str, file_sha256: str | None = None) -> RunResult:
    """``result`` as if its weights' tensors had ``digest`` (and their file ``file_sha256``, by default the same)."""
    provenance: Provenance = replace(result.provenance, weights_sha256=file_sha256 or digest, weights_digest=digest)
    return replace(result, provenance=provenance)


def comparison(before: Path, after: Path) -> Comparison:
    return compare(RunResult.load(before / RESULT_FILE), before, RunResult.load(after / RESULT_FILE), after)


def compared(before: Path, after: Path) -> tuple[bool, str]:
    """(reproduced, line) of :func:`compare`."""
    found = comparison(before, after)
    return found.reproduced, found.line


def same_hypotheses(before: Path, after: Path) -> bool:
    return comparison(before, after).same_hypotheses


def test_the_same_run_is_reproduced(tmp_path: Path) -> None:
    result = with_weights(run_result(), "a" * 64)
    before = archived(tmp_path / "before", result, HYPOTHESES)
    after = archived(tmp_path / "after", result, HYPOTHESES)
    assert compared(before, after) == (True, "reproduced: the same weights (SHA-256), the same 4 checkpoints "
                                       "(training loss, validation perplexity) and hypotheses (3 sentences of 1 test "
                                       "sets)")  # fmt: skip


def test_each_difference_is_named(tmp_path: Path) -> None:
    before = archived(tmp_path / "before", with_weights(run_result(), "a" * 64), HYPOTHESES)
    moved = with_weights(run_result(ppls=(10.0, 11.5, 12.0, 13.0)), "b" * 64)
    after = archived(tmp_path / "after", moved, [HYPOTHESES[0], "two dogs are running .", HYPOTHESES[2]])
    assert compared(before, after) == (False, "not reproduced: other weights (SHA-256); the validation perplexity "
                                       "first differs at update 200: 11.0 → 11.5; hypotheses: 2 of 3 the "
                                       "same")  # fmt: skip
    legacy = archived(tmp_path / "legacy", run_result(), HYPOTHESES)  # recorded no weights' digest: not compared
    assert compared(legacy, before)[1].startswith("reproduced: the same 4 checkpoints")
    xeon = replace(machine(capability="AVX512"), cpu="Intel(R) Xeon(R) Processor")
    elsewhere = archived(tmp_path / "elsewhere", with_weights(run_result(ppls=(10.0, 11.5, 12.0, 13.0), on=xeon),
                                                              "b" * 64), HYPOTHESES)  # fmt: skip
    assert compared(before, elsewhere) == (False, "not reproduced: other weights (SHA-256); the validation perplexity "
                                           "first differs at update 200: 11.0 → 11.5 (evaluated on AMD EPYC (AVX2) "
                                           "before, on Intel(R) Xeon(R) Processor (AVX512) now)")  # fmt: skip


def test_weights_are_compared_by_their_tensors_not_their_files(tmp_path: Path) -> None:
    """The same weights in two files that differ (metadata in another order, another model's name) are the same
    weights; two files without tensor digests that differ say nothing, and the training loss decides."""
    before = archived(tmp_path / "before", with_weights(run_result(), "a" * 64, file_sha256="c" * 64), HYPOTHESES)
    after = archived(tmp_path / "after", with_weights(run_result(), "a" * 64, file_sha256="d" * 64), HYPOTHESES)
    assert compared(before, after)[1].startswith("reproduced: the same weights (SHA-256), the same 4 checkpoints")
    other = archived(tmp_path / "other", with_weights(run_result(), "b" * 64, file_sha256="e" * 64), HYPOTHESES)
    assert compared(before, other)[1].startswith("not reproduced: other weights (SHA-256)")  # other tensors
    files_only = [replace(r, provenance=replace(r.provenance, weights_sha256=sha))
                  for r, sha in ((run_result(), "c" * 64), (run_result(), "d" * 64))]  # fmt: skip
    old, older = (
        archived(tmp_path / name, r, HYPOTHESES) for name, r in zip(("old", "older"), files_only, strict=True)
    )
    assert compared(old, older)[1].startswith("reproduced: the same 4 checkpoints")  # the loss, to the last bit
    same_file = archived(tmp_path / "same-file", files_only[0], HYPOTHESES)
    assert compared(old, same_file)[1].startswith("reproduced: the same weights (SHA-256)")


def test_hypotheses_are_lines_of_the_file_not_unicode_line_breaks(tmp_path: Path) -> None:
    """A sentence holding U+2028 or U+0085 counted as two (``str.splitlines``), so the totals were off."""
    hypotheses = ["a man\u2028walks .", "two dogs\x85run .", HYPOTHESES[2]]
    result = with_weights(run_result(), "a" * 64)
    before = archived(tmp_path / "before", result, hypotheses)
    after = archived(tmp_path / "after", result, hypotheses)
    assert compared(before, after)[1].endswith("hypotheses (3 sentences of 1 test sets)")
    (after / "hyp" / "test.txt").write_bytes(b"\xff\n")  # not UTF-8: not comparable, never a traceback
    assert "test: hypotheses not comparable" in compared(before, after)[1]


def with_losses(result: RunResult, losses: tuple[float, ...], commit: str = "0" * 40) -> RunResult:
    curve = [replace(point, train_loss=loss) for point, loss in zip(result.curve, losses, strict=True)]
    provenance = replace(result.provenance, code=replace(result.provenance.code, git_commit=commit))
    return replace(result, curve=curve, provenance=provenance)


def test_the_same_training_evaluated_by_other_code_is_reproduced(tmp_path: Path) -> None:
    """Validation and search code may change between the two: the same weights, or where the replaced run recorded
    none the same training loss at every checkpoint, reproduce the run; what the evaluation changed is said."""
    losses = (6.759604093546585, 4.6, 3.9, 3.5)
    legacy = archived(tmp_path / "legacy", with_losses(run_result(), losses, "5af6bb7" + "0" * 33), HYPOTHESES)
    again = with_losses(with_weights(run_result(ppls=(10.0, 11.000001, 12.0, 13.0)), "a" * 64), losses, "c5a0992" * 5)
    after = archived(tmp_path / "after", again, [HYPOTHESES[0], "two dogs run fast .", HYPOTHESES[2]])
    assert compared(legacy, after) == (True, "reproduced: the same training loss at 4 checkpoints; evaluated "
                                       "differently (the validation perplexity first differs at update 200: 11.0 → "
                                       "11.000001; hypotheses: 2 of 3 the same; code 5af6bb7 before, c5a0992 "
                                       "now)")  # fmt: skip
    assert not same_hypotheses(legacy, after)
    recorded = archived(tmp_path / "recorded", with_weights(run_result(), "a" * 64), HYPOTHESES)
    assert compared(recorded, after)[1].startswith("reproduced: the same weights (SHA-256); evaluated differently")
    valid_only = archived(tmp_path / "valid-only", again, HYPOTHESES)  # the validation changed, not the search
    assert compared(legacy, valid_only)[0] and same_hypotheses(legacy, valid_only)
    rounded = with_losses(run_result(), (6.759589251355235, 4.6, 3.9, 3.5))  # another processor's rounding
    moved = archived(tmp_path / "moved", rounded, HYPOTHESES)
    assert compared(legacy, moved) == (False, "not reproduced: the training loss first differs at update 100: "
                                       "6.759604093546585 → 6.759589251355235")  # fmt: skip
    assert same_hypotheses(legacy, moved)  # this one's few sentences came out the same
    shorter = archived(tmp_path / "shorter", with_losses(run_result(ppls=(10.0, 11.0, 12.0)), losses[:3]), HYPOTHESES)
    assert compared(legacy, shorter) == (False, "not reproduced: 4 checkpoints before, 3 now")


def test_the_replaced_archive_is_kept_in_the_run_folder_until_compared(tmp_path: Path) -> None:
    result = run_result()
    archive = archived(tmp_path / "results" / "a" / "seed-1", result, HYPOTHESES)
    run_dir = tmp_path / "work" / "a" / "seed-1"
    (run_dir / "model").mkdir(parents=True)
    assert rerun_folder(run_dir, archive) is None and not keep_replaced(archive, run_dir)
    assert [p.name for p in run_dir.iterdir()] == [REPLACED]
    assert [p.name for p in archive.iterdir()] == [RERUN_MARK]  # for the grid's commands in other output folders
    state = run_dir / "model" / "states" / "update-200.state.pt"  # the rerun stopped here ...
    state.parent.mkdir(parents=True)
    state.write_bytes(b"state")
    assert rerun_folder(run_dir, archive) == run_dir and keep_replaced(archive, run_dir)  # ... --rerun resumes it
    assert state.read_bytes() == b"state" and (run_dir / REPLACED / RESULT_FILE).is_file()
    other = tmp_path / "other-work" / "a" / "seed-1"  # the same grid in another output folder: not trained there
    assert rerun_folder(other, archive) == run_dir.resolve() and rerun_elsewhere(other, archive) == run_dir.resolve()
    with pytest.raises(UserError, match=f"being trained again in {run_dir}.*resume it there"):
        keep_replaced(archive, other)
    assert not other.exists() and state.is_file()
    shutil.rmtree(run_dir / "model")
    assert report_replaced(run_dir, archived(archive, result, HYPOTHESES), same_fingerprint).startswith("reproduced")
    assert not (run_dir / REPLACED).exists() and report_replaced(run_dir, archive, same_fingerprint) is None
    assert rerun_folder(run_dir, archive) is None and rerun_folder(other, archive) is None  # finished: a result
    (archive / RERUN_MARK).unlink()  # (the runner's archiving removes it)
    assert not keep_replaced(archive, archive)  # a grid that trains in its archive: the same folder
    assert [p.name for p in archive.iterdir()] == [REPLACED]
    assert (archive / REPLACED / RESULT_FILE).is_file() and keep_replaced(archive, archive)  # stopped: resumes
    assert rerun_elsewhere(other, archive) == archive


def test_the_new_result_records_what_it_replaced(tmp_path: Path) -> None:
    before = with_weights(run_result(), "a" * 64)
    run_dir = tmp_path / "run"
    archived(run_dir / REPLACED, before, HYPOTHESES)
    folder = archived(tmp_path / "archive", with_weights(run_result(ppls=(10.0, 11.5, 12.0, 13.0)), "b" * 64),
                      HYPOTHESES)  # fmt: skip
    line = report_replaced(run_dir, folder, same_fingerprint)
    rerun = RunResult.load(folder / RESULT_FILE).rerun
    assert rerun is not None and not rerun.reproduced and rerun.same_hypotheses and rerun.comparison == line
    assert line is not None and line.startswith("not reproduced: other weights (SHA-256)")
    assert rerun.replaced_weights_sha256 == "a" * 64 and rerun.replaced_machine == before.provenance.machine
    assert not (run_dir / REPLACED).exists()


def test_a_replaced_result_is_compared_when_it_is_the_runs_under_an_earlier_fingerprint(tmp_path: Path) -> None:
    """The efficiency grid's teacher replaced a result shared from the AAN grid, archived under an earlier update cap's
    fingerprint that the run still answers to (``Run.matches``): it was "not compared: other settings" and recorded
    nothing (2026-11-30). A result of other settings is still not compared, and nothing is recorded."""
    now = with_weights(run_result(), "b" * 64)
    for fingerprint, compared_now in (("e" * 16, True), ("0" * 16, False)):
        run_dir = tmp_path / fingerprint / "run"
        archived(run_dir / REPLACED, with_weights(run_result(fingerprint=fingerprint), "a" * 64), HYPOTHESES)
        folder = archived(tmp_path / fingerprint / "archive", now, HYPOTHESES)
        line = report_replaced(run_dir, folder, lambda result: result.fingerprint in (now.fingerprint, "e" * 16))
        rerun = RunResult.load(folder / RESULT_FILE).rerun
        assert not (run_dir / REPLACED).exists()
        if compared_now:
            assert line == "not reproduced: other weights (SHA-256)" and rerun is not None and rerun.comparison == line
        else:
            assert line == "not compared: the replaced result had other settings (another fingerprint)"
            assert rerun is None


def test_a_rerun_on_another_processor_is_told_it_will_likely_not_reproduce(tmp_path: Path) -> None:
    here = Machine.here("cpu")
    on_this_one = replace(machine(), cpu=here.cpu, cpu_capability=here.cpu_capability)
    same = archived(tmp_path / "same", run_result(on=on_this_one), HYPOTHESES)
    assert processor_note(same, "a seed 1", "cpu") is None
    other = archived(tmp_path / "other", run_result(on=replace(machine(), cpu="Some Other CPU")), HYPOTHESES)
    note = processor_note(other, "a seed 1", "cpu")
    assert note == (f"warning: a seed 1 was evaluated on Some Other CPU (AVX2), this machine trains it on "
                    f"{here.processor}: another processor may round differently (other vectorised kernels), so it "
                    "will likely not reproduce its archived result bit for bit (docs/training.md)")  # fmt: skip
    assert processor_note(tmp_path / "none", "a seed 1", "cpu") is None  # nothing archived
