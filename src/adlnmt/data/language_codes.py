"""Target-language codes of multilingual MarianMT models on the source side: an OPUS-MT multi-target model reads
``>>fra<< Le chien court.`` and translates into the language the code names.

A code is a piece of the model's vocabulary (``vocab.json``) that sentencepiece would split into several.
MarianTokenizer (``transformers`` 5, ``remove_language_code``) therefore splits it off before segmenting: a line that
starts with ``>>`` and holds ``<<`` has its text up to the first ``<<`` read as one token (``<unk>`` when the
vocabulary lacks it) and the rest segmented; nothing else of the line is treated specially (no code after the start,
no code after a leading space). :class:`SourceEncoder` applies the same rule to a source vocabulary that holds a code
(a piece ``>>…<<``, which only an imported multi-target model has); any other vocabulary segments the whole line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adlnmt.data.vocab import Vocab

CODE_START, CODE_END = ">>", "<<"


def is_language_code(piece: str) -> bool:
    """Whether ``piece`` is a target-language code (MarianTokenizer's ``supported_language_codes``)."""
    return piece.startswith(CODE_START) and piece.endswith(CODE_END)


def split_language_code(text: str) -> tuple[str | None, str]:
    """``text`` as its leading code (None: none) and the rest, split as MarianTokenizer splits it."""
    end = text.find(CODE_END) if text.startswith(CODE_START) else -1
    if end == -1:
        return None, text
    return text[: end + len(CODE_END)], text[end + len(CODE_END) :]


class SourceEncoder:
    """Subword ids of a source line: a leading target-language code one id when ``vocab`` holds codes."""

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self.codes = any(map(is_language_code, vocab.pieces(list(range(vocab.size)))))

    def __call__(self, text: str) -> list[int]:
        code, rest = split_language_code(text) if self.codes else (None, text)
        if code is None:
            return self.vocab.encode(text)
        return [*self.vocab.ids([code]), *self.vocab.encode(rest)]

    def batch(self, texts: list[str]) -> list[list[int]]:
        """The ids of many source lines: one sentencepiece call when the vocabulary holds no codes (``prepare``'s
        workers, :meth:`Vocab.encode_batch`), else line by line as :meth:`__call__`; a line that starts with a
        language tag of the vocabulary (``<2en> …``, data for a model trained with ``--target-tags``) has it as its
        one id, as :meth:`__call__` reads it (sentencepiece alone puts a ``▁`` piece before it)."""
        if self.codes:
            return [self(text) for text in texts]
        ids = self.vocab.encode_batch(texts)
        for index, text in enumerate(texts):
            if text.lstrip().startswith("<2"):
                ids[index] = self(text)
        return ids
