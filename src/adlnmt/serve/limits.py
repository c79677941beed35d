"""What ``adlnmt serve`` loads and the limits it enforces: one typed :class:`ServeOptions`, checked on creation.

Every limit answers a bad or too large request with a status code and a message, never a crash:

========================  ==========================================================================
limit                     answer
========================  ==========================================================================
``max_body_bytes``        413 (the body is not read further)
``max_sentences``         413 (too many sentences in one request)
``max_chars``             the sentence is cut to that many characters; the response's ``warnings`` say so
``max_beam``              422 (beam outside 1..max_beam, or n-best outside 1..beam)
``request_timeout_s``     504 (the request's sentences are dropped from the queue if not yet searched)
``max_queue_sentences``   503 with ``Retry-After`` (the queue of sentences waiting for the search is full)
========================  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from adlnmt.errors import UserError
from adlnmt.translator import PRECISIONS

ENGINES = ("torch", "onnxruntime", "ctranslate2", "auto")


@dataclass(frozen=True)
class ServeOptions:
    """The model to serve, where, how requests are batched, and the limits on requests."""

    model: str
    """Model directory (or an export directory, ``adlnmt export``)."""
    host: str = "127.0.0.1"
    """Address to listen on (loopback by default: put a reverse proxy in front to expose it)."""
    port: int = 8000
    """TCP port."""
    checkpoint: str = "best"
    """best, last, averaged or a .safetensors path (as in ``adlnmt translate``)."""
    precision: str = "fp32"
    """fp32, bf16, fp16 (CUDA) or int8 (CPU), as in ``adlnmt translate``."""
    engine: str = "torch"
    """torch, onnxruntime, ctranslate2 or auto, as in ``adlnmt translate``."""
    device: str = "cpu"
    """cpu or cuda."""
    threads: int = 0
    """CPU threads of the engine (0: its default, see :func:`adlnmt.export.engines.engine_threads`)."""
    max_batch_sentences: int = 32
    """The most sentences searched together; requests with the same search options share a batch."""
    max_wait_ms: float = 10.0
    """How long the first request of a batch waits for others to join it."""
    max_body_bytes: int = 1_000_000
    """Largest request body accepted (413 beyond)."""
    max_sentences: int = 256
    """Most sentences in one request (413 beyond)."""
    max_chars: int = 1000
    """Longer sentences are cut to this many characters, with a warning in the response."""
    max_beam: int = 16
    """Largest beam a request may ask for (422 beyond)."""
    request_timeout_s: float = 60.0
    """A request not answered by then gets 504."""
    max_queue_sentences: int = 2048
    """Sentences waiting for the search; a request that would exceed it gets 503 with Retry-After."""

    def __post_init__(self) -> None:
        problems = [
            f"--{name.replace('_', '-')} must be at least {least}, got {getattr(self, name)}"
            for name, least in (
                ("port", 0),
                ("threads", 0),
                ("max_batch_sentences", 1),
                ("max_wait_ms", 0),
                ("max_body_bytes", 64),
                ("max_sentences", 1),
                ("max_chars", 1),
                ("max_beam", 1),
                ("max_queue_sentences", 1),
            )
            if getattr(self, name) < least
        ]
        if not self.request_timeout_s > 0:
            problems.append(f"--request-timeout must be positive, got {self.request_timeout_s}")
        if self.port > 65535:
            problems.append(f"--port must be at most 65535, got {self.port}")
        if self.max_queue_sentences < self.max_sentences:
            problems.append(
                f"--max-queue-sentences ({self.max_queue_sentences}) must be at least --max-sentences "
                f"({self.max_sentences}), or a full-size request could never be queued"
            )
        if self.precision not in PRECISIONS:
            problems.append(f"unknown --precision '{self.precision}'; choose one of {', '.join(PRECISIONS)}")
        if self.engine not in ENGINES:
            problems.append(f"unknown --engine '{self.engine}'; choose one of {', '.join(ENGINES)}")
        if problems:
            raise UserError("; ".join(problems))

    def public(self) -> dict[str, float | int]:
        """The limits a client may want to know (``GET /health``)."""
        names = ("max_batch_sentences", "max_wait_ms", "max_body_bytes", "max_sentences", "max_chars", "max_beam",
                 "request_timeout_s", "max_queue_sentences")  # fmt: skip
        return {name: getattr(self, name) for name in names}
