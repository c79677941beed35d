"""store.atomic: writes a kill or a full disk cannot tear, and JSON-lines records read back as the trainer needs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from adlnmt.atomic import process_alive, remove_stale_temporaries
from adlnmt.errors import UserError
from adlnmt.store.atomic import (
    FAULT_HOOK,
    FILE_MODE,
    append_line,
    atomic_write,
    check_writable,
    copy_atomic,
    file_sha256,
    read_records,
    write_output,
    write_records,
)


def test_records_round_trip_and_a_missing_file_has_none(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    assert read_records(path) == ([], None)
    write_records(path, [{"update": 10, "valid_ppl": 3.5}])
    append_line(path, json.dumps({"update": 20, "valid_ppl": 3.0}))
    assert read_records(path) == ([{"update": 10, "valid_ppl": 3.5}, {"update": 20, "valid_ppl": 3.0}], None)


def test_a_partial_last_line_is_dropped_and_described(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"update": 10}\n{"update": 20, "valid_p')  # a crash or a full disk mid-line
    records, partial = read_records(path)
    assert records == [{"update": 10}]
    assert partial == f'{path}:2: partial last line dropped (\'{{"update": 20, "valid_p\')'


@pytest.mark.parametrize("line", ['{"update": 10', '["not", "a record"]', '{"update": "10"}', "\x00\x00"])
def test_a_damaged_line_before_the_last_is_an_error_naming_it(tmp_path: Path, line: str) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(f'{{"update": 5}}\n{line}\n{{"update": 20}}\n')
    with pytest.raises(UserError, match=f"^{path}:2: damaged record"):
        read_records(path)


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "config.json"
    atomic_write(path, lambda tmp: tmp.write_text("old", encoding="utf-8"))
    monkeypatch.setenv(FAULT_HOOK, "enospc@config.json:written")  # the fault tests' hook: a full disk there
    with pytest.raises(UserError, match=f"^{path}: cannot write \\(No space left on device\\); its previous"):
        atomic_write(path, lambda tmp: tmp.write_text("new", encoding="utf-8"))
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["config.json"]
    monkeypatch.setenv(FAULT_HOOK, "enospc@other.json:*")  # another file's points: not this write's
    atomic_write(path, lambda tmp: tmp.write_text("new", encoding="utf-8"))
    assert path.read_text() == "new"


def test_file_sha256_names_an_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"abc")
    assert file_sha256(tmp_path / "a") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    with pytest.raises(UserError, match=f"^{tmp_path / 'b'}: cannot read"):
        file_sha256(tmp_path / "b")


def test_written_files_get_the_mode_of_any_new_file(tmp_path: Path) -> None:
    """Checkpoints were 0600 (safetensors writes its files private) beside 0644 config files (issue 69 point 12)."""
    from torch import nn

    from adlnmt.train.checkpoint import save_weights

    save_weights(nn.Linear(2, 2), tmp_path / "update-1.safetensors", "m")
    atomic_write(tmp_path / "config.json", lambda tmp: tmp.write_text("{}", encoding="utf-8"))
    (tmp_path / "plain.txt").write_text("x", encoding="utf-8")
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == dict.fromkeys(modes, FILE_MODE) and modes["plain.txt"] == FILE_MODE


def test_write_output_writes_a_special_file_in_place(tmp_path: Path, capsys) -> None:
    write_output("/dev/null", "into the device, never renamed over it\n")
    assert Path("/dev/null").is_char_device()
    write_output(None, "to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"
    check_writable("-")
    write_output("-", "a dash is stdout\n")
    assert capsys.readouterr().out == "a dash is stdout\n" and not Path("-").exists()
    write_output(str(tmp_path / "new" / "out.txt"), "a file\n")
    assert (tmp_path / "new" / "out.txt").read_text(encoding="utf-8") == "a file\n"


def test_check_writable_refuses_an_output_that_is_an_input_or_another_output(tmp_path: Path) -> None:
    """contrastive --json SUITE replaced the suite with the result, and --json X --output X kept only the table."""
    suite = tmp_path / "suite.jsonl"
    suite.write_text("{}\n", encoding="utf-8")
    with pytest.raises(UserError, match=f"^{suite}: the same file as the input {suite}, which writing there"):
        check_writable(str(suite), inputs=(str(suite),))
    other = str(tmp_path / "sub" / ".." / "out.md")
    with pytest.raises(UserError, match=f"^{tmp_path / 'out.md'}: the same file as the output {other}, which"):
        check_writable(other, str(tmp_path / "out.md"), inputs=(None, "-"))
    check_writable("-", "-", "/dev/null", "/dev/null", inputs=("-", "/dev/null"))  # stdout and devices: in place


def test_check_writable_refuses_a_name_ending_in_a_separator(tmp_path: Path) -> None:
    """``--output new/`` (meant as a folder) was written as the file ``new``; ``--output file/`` replaced ``file``."""
    (tmp_path / "file").write_text("kept\n", encoding="utf-8")
    for path in (f"{tmp_path}/new/", f"{tmp_path}/file/"):
        with pytest.raises(UserError, match=f"^{path}: a directory, not a file to write$"):
            check_writable(path)


def test_copy_atomic_names_a_missing_source_not_its_target(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"abc" * 1000)
    copy_atomic(tmp_path / "a", tmp_path / "out" / "b")
    assert (tmp_path / "out" / "b").read_bytes() == b"abc" * 1000
    with pytest.raises(UserError, match=f"^{tmp_path / 'missing'}: cannot read \\(No such file or directory\\)$"):
        copy_atomic(tmp_path / "missing", tmp_path / "out" / "c")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["b"]


def a_dead_pid() -> int:
    """A PID no process has now (``os.kill(pid, 0)`` finds none)."""
    return next(pid for pid in range(2**22 - 1, 1, -1) if not process_alive(pid))


def test_only_the_temporaries_of_gone_processes_are_removed(tmp_path: Path) -> None:
    """A write killed before its rename left ``.NAME.tmp-PID`` behind, and nothing removed it; a temporary of this
    process or of another running one (a write under way) is kept, as is one of another file or a folder."""
    dead = a_dead_pid()
    stale = [tmp_path / f".train.src.tmp-{dead}", tmp_path / "sub" / f".a b[1].tmp-{dead}"]
    kept = [tmp_path / f".train.src.tmp-{os.getpid()}", tmp_path / f".train.src.tmp-{os.getppid()}",
            tmp_path / ".train.src.tmp-x", tmp_path / f".notes.tmp-{dead}"]  # fmt: skip
    for path in stale + kept:
        path.parent.mkdir(exist_ok=True)
        path.write_text("half")
    (tmp_path / f".valid.src.tmp-{dead}").mkdir()
    paths = [tmp_path / "train.src", tmp_path / "sub" / "a b[1]", tmp_path / "valid.src"]
    assert remove_stale_temporaries(paths) == stale
    assert [path.exists() for path in stale + kept] == [False, False, True, True, True, True]
    assert (tmp_path / f".valid.src.tmp-{dead}").is_dir()
    assert not process_alive(2**80)
