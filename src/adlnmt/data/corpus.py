"""Lazy reading of parallel plain-text corpora (optionally gzip or xz) with located errors, and the length/ratio
filter."""

from __future__ import annotations

import gzip
import lzma
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from adlnmt.errors import DataError

if TYPE_CHECKING:
    import numpy as np

#: The ratio filter only judges pairs whose longer side has at least this many subword tokens:
#: short pairs such as "Yes." / "Ja, das stimmt." legitimately have large ratios.
RATIO_MIN_LEN = 10


@dataclass
class PairCounts:
    """What happened to the pairs of one split: every pair read lands in exactly one of the other counters."""

    read: int = 0
    empty: int = 0
    too_long: int = 0
    bad_ratio: int = 0
    kept: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict (for the manifest)."""
        return asdict(self)


def _open_binary(path: Path):
    """Open ``path`` for binary reading, decompressing when its name ends with ``.gz`` or ``.xz``; a pipe or a device
    (``/dev/stdin``, a shell's process substitution) is read as a stream, once (:func:`require_regular_file` where a
    reader needs to read a file twice)."""
    if not path.exists():
        raise DataError("file not found", path)
    if path.is_dir():
        raise DataError("a directory, not a text file", path)
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rb")
        return lzma.open(path, "rb") if path.suffix == ".xz" else path.open("rb")
    except OSError as err:
        raise DataError(f"cannot open: {err.strerror or err}", path) from None


def require_regular_file(path: str | Path, reader: str) -> None:
    """A DataError when ``path`` is a pipe or a device: ``reader`` reads its input more than once, which a stream
    cannot give twice."""
    path = Path(path)
    if path.exists() and not path.is_file() and not path.is_dir():
        raise DataError(f"a pipe or device: {reader} reads its input more than once; save it to a file first", path)


def read_lines(path: str | Path) -> Iterator[str]:
    """Yield the lines of a UTF-8 text file lazily, without the trailing ``\\n`` / ``\\r\\n``; text otherwise kept.

    Lines are split on ``\\n`` only (never on other Unicode line separators, which would break the alignment of a
    parallel corpus). Raises DataError for a missing file, a corrupt gzip stream or invalid UTF-8 (located at the
    1-based line of the first bad byte). The existence check happens on the first ``next()``.
    """
    path = Path(path)
    with _open_binary(path) as handle:
        yield from decode_lines(handle, path)


def decode_lines(handle: Iterable[bytes], name: str | Path, start: int = 0) -> Iterator[str]:
    """The UTF-8 lines of a binary stream (a file, gzip, or ``sys.stdin.buffer``) named ``name`` in errors, whose
    first line is line ``start + 1``; a byte order mark opening the stream is not text."""
    number = start
    try:
        for raw in handle:
            number += 1
            yield _decode_line(raw, name, number)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as err:
        raise _corrupt(err, name, number) from None


def _decode_line(raw: bytes, name: str | Path, number: int) -> str:
    """Line ``number`` (1-based) as text without its line end; DataError locating invalid UTF-8."""
    try:
        text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"invalid UTF-8 (byte {err.start + 1} of the line)", name, number) from None
    return text.rstrip("\r\n")


def _corrupt(err: BaseException, name: str | Path, number: int) -> DataError:
    """The error for a compressed stream that fails after ``number`` good lines."""
    return DataError(f"corrupt compressed data after line {number}: {err}", name, number + 1)


def count_lines(path: str | Path) -> int:
    """Number of lines of a (possibly gzip) file, without decoding it."""
    path = Path(path)
    with _open_binary(path) as handle:
        try:
            return sum(1 for _ in handle)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as err:
            raise DataError(f"corrupt compressed data: {err}", path) from None


def read_parallel(
    src_path: str | Path, tgt_path: str | Path, counts: PairCounts | None = None
) -> Iterator[tuple[str, str]]:
    """Yield aligned ``(source, target)`` pairs lazily, dropping pairs where either side is empty after ``strip()``.

    Both files are checked to exist before this returns. ``counts.read`` and ``counts.empty`` are updated as pairs
    are read (the caller counts the rest). A line-count mismatch raises DataError once the shorter file ends, naming
    both files and both counts, located at the first line of the longer file that has no partner.
    """
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    for path in (src_path, tgt_path):
        _open_binary(path).close()
    return _pairs(src_path, tgt_path, counts if counts is not None else PairCounts())


def _pairs(src_path: Path, tgt_path: Path, counts: PairCounts) -> Iterator[tuple[str, str]]:
    for block in read_line_blocks(src_path, tgt_path, BLOCK_LINES):
        src, tgt, error = decode_block(block, src_path, tgt_path)
        for pair in zip(src, tgt, strict=True):
            counts.read += 1
            if blank(*pair):
                counts.empty += 1
                continue
            yield pair
        if error is not None:
            raise error


BLOCK_LINES = 8192  # lines per block of read_line_blocks


@dataclass
class LineBlock:
    """Consecutive lines of a parallel corpus as read (bytes, line ends kept): pair i is line ``first + i``."""

    src: list[bytes]
    tgt: list[bytes]
    first: int


def blank(src: str, tgt: str) -> bool:
    """Whether a pair of lines is dropped before encoding: either side is empty after ``strip()``."""
    return not src.strip() or not tgt.strip()


def read_line_blocks(src_path: str | Path, tgt_path: str | Path, size: int, skip: int = 0) -> Iterator[LineBlock]:
    """The aligned lines of two files in blocks of ``size`` lines, undecoded (:func:`decode_block` decodes them,
    e.g. in a worker process), after the first ``skip`` lines (read and checked here).

    The end of the files is checked here, after the last block: a corrupt compressed stream, and a line-count
    mismatch (decoding the longer file's extra lines), raise the error :func:`read_parallel` raises, once every line
    before it has been yielded, so that a consumer decoding the blocks in order meets the same first error.
    """
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    with _open_binary(src_path) as src_handle, _open_binary(tgt_path) as tgt_handle:
        done = 0  # lines of each file read and paired
        while True:
            want = size if done >= skip else min(size, skip - done)
            src, src_error = _read_up_to(src_handle, want)
            tgt, tgt_error = _read_up_to(tgt_handle, want)
            paired = min(len(src), len(tgt))
            block = LineBlock(src[:paired], tgt[:paired], done + 1)
            if done < skip:
                error = decode_block(block, src_path, tgt_path)[2]
                if error is not None:
                    raise error
            elif paired:
                yield block
            done += paired
            if paired < want:
                ends = (
                    (src[paired:], src_error, src_handle, src_path),
                    (tgt[paired:], tgt_error, tgt_handle, tgt_path),
                )
                _check_end(ends, done)
                return


def _read_up_to(handle: Iterable[bytes], count: int) -> tuple[list[bytes], BaseException | None]:
    """At most ``count`` lines of a binary stream, and the exception that stopped it early (None at its end)."""
    lines: list[bytes] = []
    append = lines.append
    try:
        for raw in islice(handle, count):
            append(raw)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as err:
        return lines, err
    return lines, None


def _check_end(ends: tuple[tuple[list[bytes], BaseException | None, Iterable[bytes], Path], ...], done: int) -> None:
    """The end of a parallel read after ``done`` paired lines: per file the lines read beyond them, the exception
    that stopped it, its handle and name. Raises what reading line ``done + 1`` of the source, then of the target,
    meets (as :func:`read_parallel` reads them): a corrupt stream, invalid UTF-8 or a line-count mismatch."""
    (src, src_error, _, src_path), (tgt, tgt_error, _, tgt_path) = ends
    if not src and src_error is not None:
        raise _corrupt(src_error, src_path, done)
    if src:  # read before the target's line done + 1
        _decode_line(src[0], src_path, done + 1)
    if not tgt and tgt_error is not None:
        raise _corrupt(tgt_error, tgt_path, done)
    if not src and not tgt:
        return
    extra, error, handle, path = ends[0] if src else ends[1]
    for number, raw in enumerate(extra, done + 1):
        _decode_line(raw, path, number)
    if error is not None:
        raise _corrupt(error, path, done + len(extra))
    lines = done + len(extra) + sum(1 for _ in decode_lines(handle, path, done + len(extra)))
    src_count, tgt_count = (lines, done) if src else (done, lines)
    raise DataError(
        f"line counts differ: source {src_path} has {src_count} lines, target {tgt_path} has {tgt_count}",
        path,  # the first line of the longer file without a partner
        done + 1,
    )


def decode_block(
    block: LineBlock, src_path: str | Path, tgt_path: str | Path
) -> tuple[list[str], list[str], DataError | None]:
    """The lines of a block as text without line ends, and the first invalid UTF-8 met reading it pair by pair
    (source line, then target line; the lines before it are returned)."""
    src, tgt = _decode_all(block.src, block.first), _decode_all(block.tgt, block.first)
    if src is not None and tgt is not None:
        return src, tgt, None
    texts: tuple[list[str], list[str]] = ([], [])
    for number, pair in enumerate(zip(block.src, block.tgt, strict=True), block.first):
        try:
            decoded = [_decode_line(raw, path, number) for raw, path in zip(pair, (src_path, tgt_path), strict=True)]
        except DataError as err:
            return *texts, err
        texts[0].append(decoded[0])
        texts[1].append(decoded[1])
    raise AssertionError("a block that failed to decode decoded line by line")


def _decode_all(lines: list[bytes], first: int) -> list[str] | None:
    """Lines of valid UTF-8 decoded at once (as :func:`_decode_line` would one by one); None for invalid UTF-8."""
    try:
        text = b"".join(lines).decode("utf-8")
    except UnicodeDecodeError:
        return None
    if first == 1 and text.startswith("\ufeff"):
        text = text[1:]
    parts = text.split("\n")
    if text.endswith("\n"):
        parts.pop()
    return [part.rstrip("\r") for part in parts] if "\r" in text else parts


def length_faults(
    src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_len: int, max_ratio: float
) -> tuple[np.ndarray, np.ndarray]:
    """Which pairs of subword lengths (pieces only, no BOS/EOS) are dropped: two boolean masks, too long and (of the
    others) bad ratio.

    Too long: either side has more than ``max_len`` tokens. Bad ratio: longer / shorter > ``max_ratio``, judged only
    when the longer side has at least ``RATIO_MIN_LEN`` tokens (a side with 0 tokens counts as 1).
    """
    import numpy as np  # here: translating never needs it, and it costs about 60 ms to import

    too_long = (src_lengths > max_len) | (tgt_lengths > max_len)
    longer = np.maximum(src_lengths, tgt_lengths)
    shorter = np.maximum(np.minimum(src_lengths, tgt_lengths), 1)
    bad_ratio = ~too_long & (longer >= RATIO_MIN_LEN) & (longer > max_ratio * shorter)
    return too_long, bad_ratio
