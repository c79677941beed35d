"""What a target prefix (``adlnmt translate --prefix``, the ``prefix`` field of ``adlnmt serve``) does in three edge
cases, each a choice, said in a warning (once per file for ``translate``, per line in a server's response):

- characters outside the target vocabulary: the prefix is still forced, as the target vocabulary's unknown piece,
  which the translation spells ``⁇`` (the model has no other way to write them);
- a prefix of at least the output limit of its source (``max_len_ratio · |source| + max_len_extra`` pieces): the
  translation is the prefix alone (the search forces the prefix, then must end);
- a prefix on an empty source line: not used; an empty line gets an empty translation, as without prefixes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from adlnmt.data.vocab import UNK, Vocab
from adlnmt.inference.batching import length_limit
from adlnmt.inference.options import SearchOptions

UNKNOWN = "unknown"
ALONE = "alone"
UNUSED = "unused"
SHOWN_LINES = 10  # line numbers a file's warning lists before "…"


@dataclass(frozen=True)
class PrefixNote:
    """One prefix's edge case: its ``kind`` (:data:`UNKNOWN`, :data:`ALONE`, :data:`UNUSED`), its line (1-based)
    and the detail (the unknown characters; the prefix and output limit in pieces)."""

    kind: str
    line: int
    detail: str = ""

    def line_warning(self) -> str:
        """The warning for this line alone (a server's response)."""
        return f"prefix of line {self.line}: {DOES[self.kind]}" + (f" ({self.detail})" if self.detail else "")


DOES = {
    UNKNOWN: "characters outside the target vocabulary, which the translation spells ⁇",
    ALONE: "as long as the output limit of its source or longer, so the translation is the prefix alone",
    UNUSED: "not used, as its source line is empty (an empty line gets an empty translation)",
}


def unknown_characters(vocab: Vocab, text: str, ids: Sequence[int]) -> str:
    """The characters of ``text`` that ``vocab`` encodes as its unknown piece (``ids``: ``text`` encoded), or ''."""
    if UNK not in ids:
        return ""
    return "".join(sorted({char for char in text if not char.isspace() and UNK in vocab.encode(char)}))


def prefix_notes(
    vocab: Vocab,
    sources: Sequence[Sequence[int] | None],
    prefixes: Sequence[str],
    encoded: Sequence[Sequence[int]],
    options: SearchOptions,
) -> list[PrefixNote]:
    """The edge cases among ``prefixes`` (raw target text, ``encoded`` by the target ``vocab``) of the encoded
    ``sources`` (None: an empty line), in line order."""
    notes = []
    for line, (source, prefix, ids) in enumerate(zip(sources, prefixes, encoded, strict=True), 1):
        if not prefix.strip():
            continue
        if source is None:
            notes.append(PrefixNote(UNUSED, line))
            continue
        if unknown := unknown_characters(vocab, prefix, ids):
            notes.append(PrefixNote(UNKNOWN, line, " ".join(unknown)))
        if len(ids) >= (limit := length_limit(len(source), options)):
            notes.append(PrefixNote(ALONE, line, f"{len(ids)} pieces; the limit is {limit}"))
    return notes


def file_warnings(notes: Sequence[PrefixNote], path: str) -> list[str]:
    """One warning per kind of edge case in the prefix file ``path``, naming its lines."""
    warnings = []
    for kind in (UNKNOWN, ALONE, UNUSED):
        lines = [note.line for note in notes if note.kind == kind]
        if lines:
            shown = ", ".join(map(str, lines[:SHOWN_LINES])) + (", …" if len(lines) > SHOWN_LINES else "")
            warnings.append(f"{path}: {len(lines):,} prefix(es), line(s) {shown}: {DOES[kind]}")
    return warnings


def warn_prefixes(
    vocab: Vocab, sources: Sequence[Sequence[int] | None], prefixes: Sequence[str], options: SearchOptions, path: str
) -> None:
    """On stderr, once per kind: the edge cases among the prefixes of the file ``path`` (``adlnmt translate``)."""
    notes = prefix_notes(vocab, sources, prefixes, [vocab.encode(prefix) for prefix in prefixes], options)
    for warning in file_warnings(notes, path):
        print(f"warning: {warning}", file=sys.stderr)
