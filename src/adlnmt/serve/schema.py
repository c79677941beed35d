"""The JSON of ``POST /translate``: the request (validated strictly: wrong types are 422, never coerced) and the
response (documented in the OpenAPI schema; built from :meth:`~adlnmt.inference.translator.Translation.to_dict`, the
records ``adlnmt translate --nbest/--alignments`` writes)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from adlnmt.inference.constraints import Constraints, constraint_problem


class LexicalConstraints(BaseModel):
    """The lexical constraints of one sentence (as a line of ``adlnmt translate --constraints``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    include: list[str] = Field([], description="target phrases each translation must contain, in any order")
    exclude: list[str] = Field([], description="target phrases no translation may contain")

    @model_validator(mode="after")
    def _valid(self) -> LexicalConstraints:
        problem = constraint_problem(self.include, self.exclude)
        if problem:
            raise ValueError(problem)
        return self

    def to_constraints(self) -> Constraints:
        return Constraints(tuple(self.include), tuple(self.exclude))


class TranslateRequest(BaseModel):
    """Sentences to translate and how to search."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: list[str] = Field(
        description="sentences, one translation each, in this order; [] gives []; a plain string is one sentence"
    )
    beam: int = Field(5, ge=1, description="beam size; 1 is greedy search (at most the server's max_beam)")
    nbest: int = Field(1, ge=1, description="hypotheses per sentence, best first (at most beam)")
    alignments: bool = Field(False, description="add the source-attention alignment of every hypothesis")
    prefix: list[str] | None = Field(None, description="target prefixes, one per sentence: each translation starts "
                                     "with its own and the search continues from there ('' for none)")  # fmt: skip
    constraints: list[LexicalConstraints | None] | None = Field(
        None, description="lexical constraints, one per sentence (null or {} for none); their pieces count into the "
        "request's cost (torch engine only)"
    )  # fmt: skip

    @field_validator("text", mode="before")
    @classmethod
    def _one_sentence(cls, value: Any) -> Any:
        """``{"text": "Ein Hund."}`` is ``{"text": ["Ein Hund."]}``."""
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _nbest_within_beam(self) -> TranslateRequest:
        if self.nbest > self.beam:
            raise ValueError(f"nbest ({self.nbest}) must be at most beam ({self.beam})")
        if self.prefix is not None and len(self.prefix) != len(self.text):
            raise ValueError(f"{len(self.prefix)} prefixes for {len(self.text)} sentences: give one per sentence")
        if self.constraints is not None and len(self.constraints) != len(self.text):
            raise ValueError(f"{len(self.constraints)} constraints for {len(self.text)} sentences: give one per "
                             "sentence")  # fmt: skip
        return self


class Hypothesis(BaseModel):
    """One hypothesis, as ``adlnmt translate --nbest N`` writes it."""

    translation: str
    score: float = Field(description="log_prob divided by the GNMT length penalty")
    log_prob: float
    pieces: list[str] = Field(description="target subword pieces (EOS not included)")
    alignment: list[list[float]] | None = Field(
        None, description="[len(pieces) + 1 (EOS)][len(source_pieces)] source-attention weights (rows sum to 1)"
    )


class SentenceResult(BaseModel):
    """The translation of one sentence: its best hypothesis, spelled out, and the n-best list."""

    source: str = Field(description="the sentence as translated (cut to the server's max_chars if longer)")
    translation: str = Field(description="best translation; '' for an empty sentence")
    score: float | None = None
    log_prob: float | None = None
    pieces: list[str] = Field(default_factory=list)
    alignment: list[list[float]] | None = None
    source_pieces: list[str] | None = Field(
        None, description="with alignments: the alignment's columns (source pieces with the model's markers and EOS)"
    )
    nbest: list[Hypothesis] = Field(default_factory=list, description="the nbest hypotheses, best first")


class TranslateResponse(BaseModel):
    """One result per input sentence, in input order, and what was changed in the input."""

    translations: list[SentenceResult]
    warnings: list[str] = Field(
        default_factory=list,
        description="sentences cut to max_chars characters or to the model's input limit, prefixes cut to max_chars "
        "or in an edge case (characters outside the target vocabulary, as long as the output limit, on an empty "
        "sentence), numbered by this request's own lines from 1 (also in the server's log)",
    )


class ErrorResponse(BaseModel):
    """Every error: a status code and one message (422 adds pydantic's error list, 500 an error id)."""

    error: str
    detail: list[dict] | None = None
    error_id: str | None = Field(
        None, description="a 500's id, also in the server's log line with the cause (the answer shows no internals)"
    )
