"""What ``adlnmt serve`` loads and the limits it enforces: one typed :class:`ServeOptions`, checked on creation.

Every limit answers a bad or too large request with a status code and a message, never a crash:

========================  ==========================================================================
limit                     answer
========================  ==========================================================================
``max_body_bytes``        413 (the body is not read further)
``max_sentences``         413 (too many sentences in one request)
``max_chars``             the sentence is cut to that many characters; the response's ``warnings`` say so
``max_beam``              422 (beam outside 1..max_beam, or n-best outside 1..beam)
``max_request_cost``      413 (beam × the source pieces of all its sentences: the work one request may ask for)
``request_timeout_s``     504; the request leaves the queue at once, and its search stops before its next step
``max_queue_sentences``   503 with ``Retry-After`` (the queue of sentences waiting for the search is full)
``read_timeout_s``        408 for a body not received by then; a connection without a complete request head (or
                          idle after a response) by then is closed
========================  ==========================================================================

A SIGTERM or SIGINT stops the server within ``read_timeout_s + request_timeout_s`` seconds whatever the clients
do (the requests in flight are answered meanwhile); a second signal stops it at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from adlnmt.bounds import POSITIVE, Bounds, at_least
from adlnmt.errors import UserError
from adlnmt.inference.engine import ENGINE_CHOICES as ENGINES
from adlnmt.inference.translator import PRECISIONS

FLAGS = {
    "request_timeout_s": "request_timeout",
    "read_timeout_s": "read_timeout",
}  # option → flag name, where they differ


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
    """CPU threads of the engine (0: its default, see :func:`adlnmt.inference.engines.engine_threads`)."""
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
    max_request_cost: int = 150_000
    """Most work one request may ask for: beam × the source pieces of all its sentences (413 beyond)."""
    request_timeout_s: float = 60.0
    """A request not answered by then gets 504 (its search stops)."""
    max_queue_sentences: int = 2048
    """Sentences waiting for the search; a request that would exceed it gets 503 with Retry-After."""
    allowed_hosts: tuple[str, ...] = ()
    """Host header values answered (without port; ``*``: any); empty: ``host``, localhost, 127.0.0.1 and ::1.
    Others get 421: a web page of another name resolved to this server (DNS rebinding) cannot use it."""
    read_timeout_s: float = 10.0
    """Time a client has to send a request head, then its body (408), and to stay idle between requests."""

    def host_allowed(self, header: str) -> bool:
        """Whether a request with this ``Host`` header is answered (see ``allowed_hosts``)."""
        name = header.strip().lower()
        name = name[1 : name.find("]")] if name.startswith("[") else name.rsplit(":", 1)[0] if ":" in name else name
        allowed = self.allowed_hosts or (self.host, "localhost", "127.0.0.1", "::1")
        return "*" in allowed or name in {host.lower().strip("[]") for host in allowed}

    @property
    def shutdown_timeout_s(self) -> float:
        """The longest a SIGTERM waits for the requests in flight: their body, then their search."""
        return self.read_timeout_s + self.request_timeout_s

    def __post_init__(self) -> None:
        problems = [
            f"--{FLAGS.get(name, name).replace('_', '-')} must be {bounds.describe()}, got {getattr(self, name)}"
            for name, bounds in RANGES.items()
            if not bounds.holds(getattr(self, name))
        ]
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
                 "max_request_cost", "request_timeout_s", "max_queue_sentences", "read_timeout_s")  # fmt: skip
        return {name: getattr(self, name) for name in names}


RANGES: dict[str, Bounds] = {  # the range of each numeric option (floats: finite)
    "port": Bounds(0, 65535),
    "threads": at_least(0),
    "max_batch_sentences": at_least(1),
    "max_wait_ms": at_least(0),
    "max_body_bytes": at_least(64),
    "max_sentences": at_least(1),
    "max_chars": at_least(1),
    "max_beam": at_least(1),
    "request_timeout_s": POSITIVE,
    "max_queue_sentences": at_least(1),
    "max_request_cost": at_least(1),
    "read_timeout_s": POSITIVE,
}
