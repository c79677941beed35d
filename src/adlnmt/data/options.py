"""The options of ``prepare`` that shape a data directory (recorded in its manifest): :class:`PrepareOptions`, whose
fields declare the flags of ``adlnmt prepare`` (:mod:`adlnmt.flags`) and the defaults experiments fill in.
Without numpy or sentencepiece, so that ``--help`` and grid files load fast."""

from __future__ import annotations

from dataclasses import dataclass

from adlnmt.bounds import at_least
from adlnmt.errors import DataError
from adlnmt.flags import option

MODEL_TYPES = ("bpe", "unigram")  # sentencepiece's subword models
PAD, UNK, BOS, EOS = 0, 1, 2, 3  # the special ids of every vocabulary (adlnmt.data.vocab)
SPECIAL_IDS = {"pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS}


@dataclass(frozen=True)
class PrepareOptions:
    """How ``prepare`` builds the vocabularies and which training pairs it keeps."""

    vocab_size: int = option(8000, "subword vocabulary size (default %(default)s)", bounds=at_least(1))
    joint: bool = True  # one vocabulary for both sides; flags --joint and --separate (adlnmt prepare)
    model_type: str = option("bpe", "subword model (default %(default)s)", choices=MODEL_TYPES)
    max_len: int = option(250, "drop train pairs with more subwords (default %(default)s)", bounds=at_least(1))
    max_ratio: float = option(
        3.0, "drop train pairs whose length ratio is larger (default %(default)s)", bounds=at_least(1)
    )
    source_markers: bool = option(False, "start every source with BOS (COMET variant)", switch=True)

    def check(self) -> None:
        """Raise DataError for a vocabulary with no room beside the special ids, an unknown subword model type or an
        impossible length limit."""
        if self.vocab_size < len(SPECIAL_IDS) + 1:
            raise DataError(f"vocabulary size {self.vocab_size} is too small")
        if self.model_type not in MODEL_TYPES:
            raise DataError(f"model type must be one of {', '.join(MODEL_TYPES)}, got {self.model_type!r}")
        if self.max_len < 1:
            raise DataError(f"max_len must be at least 1, got {self.max_len}")
        if not self.max_ratio >= 1.0:
            raise DataError(f"max_ratio must be at least 1, got {self.max_ratio}")


PREPARE_DEFAULTS = PrepareOptions()
