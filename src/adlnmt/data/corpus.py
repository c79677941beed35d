"""Lazy reading of parallel plain-text corpora (optionally gzip or xz) with located errors, and the length/ratio
filter."""

from __future__ import annotations

import gzip
import lzma
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from adlnmt.errors import DataError

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


def decode_lines(handle: Iterable[bytes], name: str | Path) -> Iterator[str]:
    """The UTF-8 lines of a binary stream (a file, gzip, or ``sys.stdin.buffer``) named ``name`` in errors; a byte
    order mark opening the stream is not text."""
    number = 0
    try:
        for raw in handle:
            number += 1
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise DataError(f"invalid UTF-8 (byte {err.start + 1} of the line)", name, number) from None
            yield text.rstrip("\r\n")
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as err:
        raise DataError(f"corrupt compressed data after line {number}: {err}", name, number + 1) from None


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
    src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
    number = 0
    while True:
        src = next(src_lines, None)
        tgt = next(tgt_lines, None)
        if src is None or tgt is None:
            if src is None and tgt is None:
                return
            src_count = number + (0 if src is None else 1 + sum(1 for _ in src_lines))
            tgt_count = number + (0 if tgt is None else 1 + sum(1 for _ in tgt_lines))
            raise DataError(
                f"line counts differ: source {src_path} has {src_count} lines, target {tgt_path} has {tgt_count}",
                tgt_path if src is None else src_path,  # the first line of the longer file without a partner
                number + 1,
            )
        number += 1
        counts.read += 1
        if not src.strip() or not tgt.strip():
            counts.empty += 1
            continue
        yield src, tgt


def length_filter(src_len: int, tgt_len: int, max_len: int, max_ratio: float) -> str | None:
    """Why a pair of subword lengths (pieces only, no BOS/EOS) is dropped: ``"too_long"``, ``"bad_ratio"`` or None.

    Too long: either side has more than ``max_len`` tokens. Bad ratio: longer / shorter > ``max_ratio``, judged only
    when the longer side has at least ``RATIO_MIN_LEN`` tokens (a side with 0 tokens counts as 1).
    """
    if src_len > max_len or tgt_len > max_len:
        return "too_long"
    longer, shorter = max(src_len, tgt_len), max(min(src_len, tgt_len), 1)
    if longer >= RATIO_MIN_LEN and longer > max_ratio * shorter:
        return "bad_ratio"
    return None
