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

FORMAT_VERSION = 3  # shards of token ids and sentence lengths; formats 1 (one array pair per split and side) and 2
READABLE_VERSIONS = (1, 2, 3)  # (shards with int64 offsets instead of lengths) still read, as they are
MANIFEST = "manifest.json"
SIDES = ("src", "tgt")
MANIFEST_ENTRIES: dict[str, type] = {"spm": dict, "joint": bool, "splits": dict}
SPLIT_FILES = {1: "files", 2: "shards", 3: "shards"}  # the manifest entry that names the arrays of each split
INDEX_FILES = {1: "offsets", 2: "offsets", 3: "lengths"}  # the file beside each side's tokens that delimits sentences


def _check_manifest(manifest: dict[str, Any], path: Path) -> None:
    """DataError naming ``path`` when an entry the loader reads is missing or of the wrong type."""
    expected = {**MANIFEST_ENTRIES, SPLIT_FILES[manifest["format_version"]]: dict}
    wrong = [name for name, kind in expected.items() if not isinstance(manifest.get(name), kind)]
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
        self._verified: set[tuple[str, int]] = set()

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
        if not isinstance(manifest, dict) or manifest.get("format_version") not in READABLE_VERSIONS:
            found = manifest.get("format_version") if isinstance(manifest, dict) else None
            readable = ", ".join(map(str, READABLE_VERSIONS))
            raise DataError(f"unsupported format version {found!r} (expected one of {readable})", manifest_path)
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

    def shards(self, split: str) -> list[dict[str, Any]]:
        """The shards of ``split`` as manifest entries: ``corpus``, ``pairs``, ``files`` (per side ``tokens`` and
        ``lengths``; ``offsets`` before format 3) and, from format 2 on, ``bytes`` and ``sha256`` per file. A format-1
        split is one shard."""
        manifest_path = self.path / MANIFEST
        if self.manifest["format_version"] == 1:
            files = self.manifest["files"]
            if split not in files:
                raise DataError(f"no split {split!r} (has: {', '.join(files)})", manifest_path)
            kept = self.manifest["splits"].get(split, {}).get("kept")
            return [{"corpus": "train", "pairs": kept, "files": files[split]}]
        shards = self.manifest["shards"]
        if split not in shards or not isinstance(shards[split], list):
            raise DataError(f"no split {split!r} (has: {', '.join(shards)})", manifest_path)
        return shards[split]

    def files(self) -> list[Path]:
        """The files this directory is made of: its manifest, sentencepiece models (and their ``.vocab`` listings),
        every split's arrays and its raw text: what a command writing into the directory must not replace."""
        models = [str(name) for name in self.manifest["spm"].values()]
        names = {MANIFEST, *models, *(str(Path(name).with_suffix(".vocab")) for name in models)}  # + readable listing
        for split in self.manifest[SPLIT_FILES[self.manifest["format_version"]]]:
            for entry in self.shards(split):
                sides = entry.get("files", {}) if isinstance(entry, dict) else {}
                names.update(name for side in sides.values() if isinstance(side, dict) for name in side.values())
        texts = self.manifest.get("text", {})
        names.update(name for sides in texts.values() if isinstance(sides, dict) for name in sides.values())
        return [self.path / str(name) for name in sorted(names, key=str)]

    def vocabulary_difference(self, other: DataDir) -> str | None:
        """What keeps ids of ``other`` from meaning the same here ("source vocabulary", "target vocabulary" or
        "source layout (BOS markers)"), None when nothing does: the vocabularies are compared by
        :meth:`Vocab.table` (each id's piece, score and kind), not by their files' bytes."""
        pairs = (("source", self.src_vocab, other.src_vocab), ("target", self.tgt_vocab, other.tgt_vocab))
        for side, mine, theirs in pairs:
            if mine is not theirs and mine.table() != theirs.table():
                return f"{side} vocabulary"
        return "source layout (BOS markers)" if self.source_markers != other.source_markers else None

    def corpora(self) -> dict[str, dict[str, Any]]:
        """The training corpora by name: ``weight``, ``tag`` (None or e.g. ``<2en>``) and ``valid`` (the range of
        its pairs in the valid split, or None). A format-1 directory has one corpus, ``train``."""
        if self.manifest["format_version"] == 1:
            return {"train": {"weight": 1.0, "tag": None, "valid": [0, self.manifest["splits"]["valid"]["kept"]]}}
        return self.manifest.get("corpora", {})

    def open_shard(self, split: str, index: int) -> Split:
        """Shard ``index`` of ``split``, memory-mapped; from format 2 on its files' sizes and digests are checked
        the first time this DataDir opens it (DataError naming a missing, truncated or foreign file)."""
        shards = self.shards(split)
        try:
            entry = shards[index]
            expected = entry["pairs"]
            kinds = ("tokens", INDEX_FILES[self.manifest["format_version"]])
            names = {side: {kind: str(entry["files"][side][kind]) for kind in kinds} for side in SIDES}
        except (KeyError, TypeError, AttributeError, IndexError) as err:
            raise DataError(f"malformed entry for shard {index} of {split!r} ({err!r})", self.path / MANIFEST) from None
        from adlnmt.data.dataset import Split  # numpy: only where the arrays are read
        from adlnmt.data.digests import verify_digests

        if self.manifest["format_version"] > 1 and (split, index) not in self._verified:
            verify_digests(self.path, entry)
            self._verified.add((split, index))
        sizes = {"src": self.src_vocab.size, "tgt": self.tgt_vocab.size}
        return Split(split, self.path, names, self.source_markers, expected, sizes)

    def split(self, name: str) -> Split:
        """The split ``name`` (``"train"`` or ``"valid"``) as one array pair, memory-mapped on first use; a split of
        several shards is read shard by shard instead (:meth:`open_shard`, :mod:`adlnmt.data.stream`)."""
        if name not in self._splits:
            count = len(self.shards(name))
            if count != 1:
                raise DataError(f"split {name!r} has {count} shards; read it shard by shard", self.path / MANIFEST)
            self._splits[name] = self.open_shard(name, 0)
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
