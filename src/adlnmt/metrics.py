"""Corpus metrics through sacreBLEU (BLEU with its signature, chrF) on detokenised text."""

from __future__ import annotations

from pathlib import Path

import sacrebleu

from adlnmt.errors import DataError


def read_lines(path: str | Path) -> list[str]:
    """Lines of a UTF-8 text file without their line ends; bad bytes are reported with their line."""
    path = Path(path)
    if not path.is_file():
        raise DataError("file not found", path)
    lines = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                lines.append(raw.decode("utf-8").rstrip("\r\n"))
            except UnicodeDecodeError as err:
                raise DataError(f"invalid UTF-8 (byte {err.start + 1})", path, number) from None
    return lines


def score(hypotheses: list[str], references: list[str], hyp_name: str = "hyp", ref_name: str = "ref") -> dict:
    if len(hypotheses) != len(references):
        raise DataError(
            f"{hyp_name} has {len(hypotheses)} lines but {ref_name} has {len(references)}; they must be aligned"
        )
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": bleu_score.score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf": chrf_score.score,
        "chrf_signature": str(chrf.get_signature()),
    }
