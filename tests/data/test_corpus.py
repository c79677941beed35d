"""Reading parallel corpora: located errors, empty-pair removal with alignment kept, length/ratio filter."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from adlnmt.data.corpus import RATIO_MIN_LEN, PairCounts, count_lines, length_filter, read_lines, read_parallel
from adlnmt.errors import DataError


def write(path: Path, data: str | bytes) -> Path:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as handle:
            handle.write(raw)
    else:
        path.write_bytes(raw)
    return path


def test_lines_strip_only_the_newline(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", "one  \r\n\ttwo\u2028still two\n  three")
    assert list(read_lines(path)) == ["one  ", "\ttwo\u2028still two", "  three"]


def test_gzip_is_detected_by_suffix(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt.gz", "eins\nzwei\n")
    assert list(read_lines(path)) == ["eins", "zwei"]
    assert count_lines(path) == 2


def test_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.src"
    with pytest.raises(DataError, match="file not found") as info:
        list(read_lines(missing))
    assert info.value.path == str(missing)
    assert str(info.value).startswith(str(missing))


def test_read_parallel_checks_files_before_iterating(tmp_path: Path) -> None:
    src = write(tmp_path / "a.src", "x\n")
    with pytest.raises(DataError, match="file not found") as info:
        read_parallel(src, tmp_path / "missing.tgt")  # no next() needed
    assert info.value.path == str(tmp_path / "missing.tgt")


@pytest.mark.parametrize("name", ["bad.txt", "bad.txt.gz"])
def test_invalid_utf8_reports_line_of_first_bad_byte(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / name, b"fine\nalso fine\nbroken \xff here\nbad \xfe again\n")
    with pytest.raises(DataError, match="invalid UTF-8") as info:
        list(read_lines(path))
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: ")


def test_invalid_utf8_in_parallel_target(tmp_path: Path) -> None:
    src = write(tmp_path / "a.src", "a\nb\nc\n")
    tgt = write(tmp_path / "a.tgt", b"a\nb\xc3\nc\n")  # truncated 2-byte sequence
    with pytest.raises(DataError) as info:
        list(read_parallel(src, tgt))
    assert (info.value.path, info.value.line) == (str(tgt), 2)


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = tmp_path / "x.gz"
    path.write_bytes(b"this is not gzip at all\n")
    with pytest.raises(DataError, match="gzip"):
        list(read_lines(path))


@pytest.mark.parametrize(("n_src", "n_tgt"), [(4, 3), (3, 5)])
def test_line_count_mismatch_names_both_files_and_counts(tmp_path: Path, n_src: int, n_tgt: int) -> None:
    src = write(tmp_path / "c.src", "".join(f"s{i}\n" for i in range(n_src)))
    tgt = write(tmp_path / "c.tgt", "".join(f"t{i}\n" for i in range(n_tgt)))
    with pytest.raises(DataError) as info:
        list(read_parallel(src, tgt))
    message = str(info.value)
    assert f"{src} has {n_src} lines" in message
    assert f"{tgt} has {n_tgt}" in message
    longer = src if n_src > n_tgt else tgt
    assert (info.value.path, info.value.line) == (str(longer), min(n_src, n_tgt) + 1)


def test_missing_final_newline_is_still_a_line(tmp_path: Path) -> None:
    src = write(tmp_path / "d.src", "a\nb")
    tgt = write(tmp_path / "d.tgt", "A\nB\n")
    assert list(read_parallel(src, tgt)) == [("a", "A"), ("b", "B")]


def test_empty_lines_are_dropped_as_pairs_and_alignment_kept(tmp_path: Path) -> None:
    src = write(tmp_path / "e.src", "s1\n\ns3\ns4\ns5 \n   \n")
    tgt = write(tmp_path / "e.tgt", "t1\nt2\nt3\n \t \nt5\nt6\n")
    counts = PairCounts()
    pairs = list(read_parallel(src, tgt, counts))
    assert pairs == [("s1", "t1"), ("s3", "t3"), ("s5 ", "t5")]
    assert ("s3", "t3") in pairs  # the pair after a dropped one stays aligned
    assert (counts.read, counts.empty) == (6, 3)


def test_length_filter() -> None:
    assert length_filter(10, 12, max_len=250, max_ratio=3.0) is None
    assert length_filter(251, 100, max_len=250, max_ratio=3.0) == "too_long"
    assert length_filter(100, 251, max_len=250, max_ratio=3.0) == "too_long"
    assert length_filter(250, 250, max_len=250, max_ratio=3.0) is None
    assert length_filter(4, 40, max_len=250, max_ratio=3.0) == "bad_ratio"
    assert length_filter(40, 4, max_len=250, max_ratio=3.0) == "bad_ratio"
    assert length_filter(10, 30, max_len=250, max_ratio=3.0) is None  # exactly the ratio is allowed
    assert length_filter(1, RATIO_MIN_LEN - 1, max_len=250, max_ratio=3.0) is None  # short pairs are exempt
    assert length_filter(1, RATIO_MIN_LEN, max_len=250, max_ratio=3.0) == "bad_ratio"


def test_a_pipe_is_read_as_a_stream_and_prepare_refuses_it(tmp_path: Path) -> None:
    """Issue 69 point 13: ``--input /dev/stdin`` and process substitution (a pipe) were refused as non-regular files;
    prepare, which reads its input twice, refuses a pipe with a reason."""
    import os
    import threading

    from adlnmt.data.prepare import prepare

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("one\ntwo\n", encoding="utf-8"))
    writer.start()
    assert list(read_lines(fifo)) == ["one", "two"]
    writer.join()
    with pytest.raises(DataError, match="a directory, not a text file"):
        list(read_lines(tmp_path))
    plain = write(tmp_path / "plain.txt", "a\n")
    with pytest.raises(DataError, match=f"^{fifo}: a pipe or device: prepare reads its input more than once"):
        prepare(fifo, plain, plain, plain, tmp_path / "data")


def test_dev_stdin_is_an_input_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    ref = write(tmp_path / "ref.txt", "a small cat\n")
    argv = [sys.executable, "-m", "adlnmt", "score", "--hyp", "/dev/stdin", "--ref", str(ref)]
    done = subprocess.run(argv, input="a small cat\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "BLEU" in done.stdout
