"""The digests of the files of a data directory's shards (no numpy: :class:`~adlnmt.data.data_dir.DataDir` checks
them before a shard is read): a missing, truncated or foreign file is refused by name."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from adlnmt.errors import DataError


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in blocks (a shard can be larger than memory allows)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def check_files(directory: Path, entry: dict[str, Any], manifest_path: Path) -> None:
    """Cheap check of a shard's files (existence and size, no reading): DataError naming the first bad one."""
    try:
        sizes = dict(entry["bytes"])
    except (KeyError, TypeError, ValueError):
        raise DataError("malformed shard entry (no file sizes)", manifest_path) from None
    for name, size in sizes.items():
        path = directory / name
        if not path.is_file():
            raise DataError("shard file missing (re-run prepare)", path)
        if path.stat().st_size != size:
            raise DataError(f"shard file has {path.stat().st_size} bytes, the manifest says {size} (truncated?)", path)


def verify_digests(directory: Path, entry: dict[str, Any]) -> None:
    """DataError naming the first file of a shard whose size or SHA-256 differs from its manifest entry."""
    check_files(directory, entry, directory)
    for name, expected in entry.get("sha256", {}).items():
        if file_digest(directory / name) != expected:
            raise DataError("shard file does not match the manifest's digest (foreign or damaged)", directory / name)
