"""Reading parallel corpora: located errors, empty-pair removal with alignment kept, length/ratio filter."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from adlnmt.data import corpus as corpus_module
from adlnmt.data.corpus import (
    RATIO_MIN_LEN,
    PairCounts,
    count_lines,
    length_faults,
    read_line_blocks,
    read_lines,
    read_parallel,
)
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


def test_length_faults() -> None:
    cases = [  # source and target pieces, and the fault
        (10, 12, None), (251, 100, "too_long"), (100, 251, "too_long"), (250, 250, None), (4, 40, "bad_ratio"),
        (40, 4, "bad_ratio"), (10, 30, None),  # exactly the ratio is allowed
        (1, RATIO_MIN_LEN - 1, None),  # short pairs are exempt
        (1, RATIO_MIN_LEN, "bad_ratio"), (0, 300, "too_long"), (0, RATIO_MIN_LEN, "bad_ratio"),
    ]  # fmt: skip
    src, tgt = (np.array([case[i] for case in cases]) for i in (0, 1))
    too_long, bad_ratio = length_faults(src, tgt, max_len=250, max_ratio=3.0)
    assert [case[2] for case in cases] == [
        "too_long" if long else "bad_ratio" if ratio else None for long, ratio in zip(too_long, bad_ratio, strict=True)
    ]


def reference_pairs(src: Path, tgt: Path, counts: PairCounts) -> list[tuple[str, str]]:
    """Line by line, as read_parallel read before it read blocks (the oracle of the test below)."""
    src_lines, tgt_lines, pairs, number = read_lines(src), read_lines(tgt), [], 0
    while True:
        s, t = next(src_lines, None), next(tgt_lines, None)
        if s is None or t is None:
            if s is None and t is None:
                return pairs
            src_count = number + (0 if s is None else 1 + sum(1 for _ in src_lines))
            tgt_count = number + (0 if t is None else 1 + sum(1 for _ in tgt_lines))
            raise DataError(f"line counts differ: source {src} has {src_count} lines, target {tgt} has {tgt_count}",
                            tgt if s is None else src, number + 1)  # fmt: skip
        number += 1
        counts.read += 1
        if not s.strip() or not t.strip():
            counts.empty += 1
            continue
        pairs.append((s, t))


def outcome(read, src: Path, tgt: Path) -> tuple[object, ...]:
    counts = PairCounts()
    try:
        return ("pairs", read(src, tgt, counts), counts.read, counts.empty)
    except DataError as err:
        return ("error", str(err), err.path, err.line)


GOOD = [f"line {i} \u00e4" for i in range(23)]
FILES = {  # name: source bytes, target bytes (.gz names are compressed)
    "plain": ("\n".join(GOOD) + "\n", "\n".join(GOOD) + "\n"),
    "bom, CRs, blanks, no final newline": ("\ufeffa\r\n \n" + "\n".join(GOOD), "b\r\r\n\u3000\n" + "\n".join(GOOD)),
    "bad source byte": (b"a\n" * 9 + b"\xff\n" + b"a\n" * 9, b"b\n" * 9 + b"\xfe\n" + b"b\n" * 9),
    "bad target byte first": (b"a\n" * 12 + b"\xff\n", b"b\n" * 11 + b"\xfe\n" + b"b\n"),
    "source longer": ("\n".join(GOOD) + "\nx\ny\n", "\n".join(GOOD) + "\n"),
    "target longer": ("\n".join(GOOD), "\n".join(GOOD) + "\nx\n"),
    "source longer, bad byte in its extra lines": (b"a\n" * 16 + b"\xff\n", b"b\n" * 15),
    "corrupt source.gz": ("\n".join(GOOD) + "\n", "\n".join(GOOD) + "\n"),
    "corrupt target.gz, bad source byte after": ("\n".join(GOOD[:5]) + "\n\udcff\n", "\n".join(GOOD) + "\n"),
}


@pytest.mark.parametrize("size", [1, 4, 7, 64])
@pytest.mark.parametrize("case", sorted(FILES))
def test_block_reading_gives_the_pairs_counts_and_first_error_of_line_by_line_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, size: int
) -> None:
    raw = [side.encode("utf-8", "surrogateescape") if isinstance(side, str) else side for side in FILES[case]]
    names = ["a.src", "a.tgt"]
    if "corrupt" in case:
        index = 0 if "corrupt source" in case else 1
        names[index] += ".gz"
        compressed = gzip.compress(raw[index])
        raw[index] = compressed[: len(compressed) // 2 + 20]  # a truncated stream
    src, tgt = (tmp_path / name for name in names)
    for path, data in zip((src, tgt), raw, strict=True):
        path.write_bytes(data)
    monkeypatch.setattr(corpus_module, "BLOCK_LINES", size)
    got = outcome(lambda s, t, c: list(read_parallel(s, t, c)), src, tgt)
    assert got == outcome(reference_pairs, src, tgt)
    if got[0] == "pairs":  # the blocks after a skipped start are the lines after it
        tail = [line for block in read_line_blocks(src, tgt, size, skip=5) for line in block.tgt]
        assert [line.decode().rstrip("\r\n") for line in tail] == list(read_lines(tgt))[5:]


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
    plain, other = write(tmp_path / "plain.txt", "a\n"), write(tmp_path / "other.txt", "b\n")
    with pytest.raises(DataError, match=f"^{fifo}: a pipe or device: prepare reads its input more than once"):
        prepare(fifo, plain, plain, other, tmp_path / "data")


def test_dev_stdin_is_an_input_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    ref = write(tmp_path / "ref.txt", "a small cat\n")
    argv = [sys.executable, "-m", "adlnmt", "score", "--hyp", "/dev/stdin", "--ref", str(ref)]
    done = subprocess.run(argv, input="a small cat\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "BLEU" in done.stdout
