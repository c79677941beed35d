"""A directory written by ``adlnmt prepare``: the names of its format, its manifest and vocabularies, its splits on
first use and its raw validation text. Reading it (e.g. an export's vocabularies) imports neither numpy nor PyTorch;
the encoded arrays are :class:`adlnmt.data.dataset.Split`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from adlnmt.data.vocab import BOS, EOS, Vocab
from adlnmt.errors import DataError
from adlnmt.jsontext import JsonError, parse_json

if TYPE_CHECKING:
    from adlnmt.data.dataset import Split

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SIDES = ("src", "tgt")
MANIFEST_ENTRIES: dict[str, type] = {"spm": dict, "joint": bool, "files": dict, "splits": dict}


def _check_manifest(manifest: dict[str, Any], path: Path) -> None:
    """DataError naming ``path`` when an entry the loader reads is missing or of the wrong type."""
    wrong = [name for name, kind in MANIFEST_ENTRIES.items() if not isinstance(manifest.get(name), kind)]
    if wrong:
        raise DataError(f"malformed manifest: {', '.join(wrong)} missing or of the wrong type", path)


class DataDir:
    """A directory written by ``prepare``: its manifest, vocabularies and splits (loaded on first use)."""

    def __init__(self, path: Path, manifest: dict[str, Any], src_vocab: Vocab, tgt_vocab: Vocab) -> None:
        self.path = path
        self.manifest = manifest
        self.src_vocab = src_vocab
        self.tgt_vocab = tgt_vocab
        self._splits: dict[str, Split] = {}

    @classmethod
    def load(cls, path: str | Path) -> DataDir:
        """Read the manifest and the sentencepiece models; DataError naming the file when one is missing or corrupt."""
        path = Path(path)
        manifest_path = path / MANIFEST
        if not path.is_dir():
            raise DataError("data directory not found (run `adlnmt prepare` first)", path)
        if not manifest_path.is_file():
            raise DataError("no manifest: not a prepared data directory, or prepare did not finish", manifest_path)
        try:
            manifest = parse_json(manifest_path.read_bytes())
        except JsonError as err:
            raise DataError(f"invalid JSON: {err.reason}", manifest_path, err.line) from None
        if not isinstance(manifest, dict) or manifest.get("format_version") != FORMAT_VERSION:
            found = manifest.get("format_version") if isinstance(manifest, dict) else None
            raise DataError(f"unsupported format version {found!r} (expected {FORMAT_VERSION})", manifest_path)
        _check_manifest(manifest, manifest_path)
        try:
            spm_files = manifest["spm"]
            src_vocab = Vocab.load(path / spm_files["src"])
            tgt_vocab = src_vocab if manifest["joint"] else Vocab.load(path / spm_files["tgt"])
        except (KeyError, TypeError) as err:
            raise DataError(f"manifest lacks the entry {err}", manifest_path) from None
        return cls(path, manifest, src_vocab, tgt_vocab)

    @property
    def source_markers(self) -> bool:
        """Whether sources start with BOS."""
        return bool(self.manifest.get("source_markers", False))

    def vocabulary_difference(self, other: DataDir) -> str | None:
        """What keeps ids of ``other`` from meaning the same here ("source vocabulary", "target vocabulary" or
        "source layout (BOS markers)"), None when nothing does: the vocabularies are compared by
        :meth:`Vocab.table` (each id's piece, score and kind), not by their files' bytes."""
        pairs = (("source", self.src_vocab, other.src_vocab), ("target", self.tgt_vocab, other.tgt_vocab))
        for side, mine, theirs in pairs:
            if mine is not theirs and mine.table() != theirs.table():
                return f"{side} vocabulary"
        return "source layout (BOS markers)" if self.source_markers != other.source_markers else None

    def split(self, name: str) -> Split:
        """The split ``name`` (``"train"`` or ``"valid"``), memory-mapped on first use."""
        if name not in self._splits:
            files = self.manifest.get("files", {})
            if name not in files:
                raise DataError(f"no split {name!r} (has: {', '.join(files)})", self.path / MANIFEST)
            try:
                expected = self.manifest["splits"].get(name, {}).get("kept")
                names = {side: {kind: str(files[name][side][kind]) for kind in ("tokens", "offsets")} for side in SIDES}
            except (KeyError, TypeError, AttributeError) as err:
                raise DataError(f"malformed entry for split {name!r} ({err!r})", self.path / MANIFEST) from None
            sizes = {"src": self.src_vocab.size, "tgt": self.tgt_vocab.size}
            from adlnmt.data.dataset import Split  # numpy: only where the arrays are read

            self._splits[name] = Split(name, self.path, names, self.source_markers, expected, sizes)
        return self._splits[name]

    def encode_source(self, text: str, max_len: int | None = None) -> list[int]:
        """Encoder input ids of a raw sentence, laid out like ``Split.src``; pieces cut to ``max_len`` if given."""
        return self.source_ids(self.src_vocab.encode(text), max_len)

    def source_ids(self, pieces: list[int], max_len: int | None = None) -> list[int]:
        """Encoder input ids of a sentence's source subword ids (:meth:`encode_source` after the subword encoding)."""
        if max_len is not None:
            pieces = pieces[:max_len]
        return ([BOS] if self.source_markers else []) + pieces + [EOS]

    def valid_references(self) -> list[str]:
        """The raw valid targets, aligned with ``split("valid")`` (BLEU references)."""
        return self.raw_text("valid", "tgt")

    def raw_text(self, split: str, side: str) -> list[str]:
        """The raw text of ``split`` (only ``"valid"`` is kept) aligned with the encoded split, e.g. BLEU references."""
        try:
            name = self.manifest["text"][split][side]
        except (KeyError, TypeError):
            raise DataError(f"no raw text kept for {split}.{side}", self.path / MANIFEST) from None
        path = self.path / name
        if not path.is_file():
            raise DataError("data file missing (re-run prepare)", path)
        try:  # split on "\n" only, as prepare wrote it (a "\r" inside a line stays in it)
            lines = path.read_bytes().decode("utf-8").split("\n")
        except UnicodeDecodeError:
            raise DataError("invalid UTF-8", path) from None
        if lines and lines[-1] == "":
            lines.pop()
        expected = len(self.split(split))
        if len(lines) != expected:
            raise DataError(f"has {len(lines)} lines, the encoded split has {expected}", path)
        return lines
