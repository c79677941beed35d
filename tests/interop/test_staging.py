"""``write_new_directory`` (``adlnmt import``, ``export --format hf-marian``, ``publish``): what a killed run left."""

from __future__ import annotations

import os
from pathlib import Path

from adlnmt.interop.staging import write_new_directory
from store.test_atomic import a_dead_pid


def test_the_temporaries_of_killed_runs_are_removed_by_the_next_write(tmp_path: Path, capsys) -> None:
    """A run killed (SIGKILL) before its rename left ``.OUT.tmp-PID/`` beside ``--out``: the next write removes it
    (said on stderr); a running process's temporary, another name's and one with no PID are kept."""
    dead = a_dead_pid()
    out = tmp_path / "out[1]"
    stale = tmp_path / f".out[1].tmp-{dead}"
    kept = [tmp_path / f".out[1].tmp-{os.getppid()}", tmp_path / f".out1.tmp-{dead}", tmp_path / ".out[1].tmp-x"]
    for folder in (stale, *kept):
        folder.mkdir()
        (folder / "half").write_text("half")
    write_new_directory(out, lambda temporary: (temporary / "done").write_text("done"), "the export")
    assert (out / "done").read_text() == "done"
    assert not stale.exists() and all(folder.is_dir() for folder in kept)
    assert capsys.readouterr().err == f"removed {stale}, left by a run that was killed\n"
