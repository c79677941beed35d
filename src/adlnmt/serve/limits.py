"""What ``adlnmt serve`` loads and the limits it enforces: one typed :class:`ServeOptions`, checked on creation.

Every limit answers a bad or too large request with a status code and a message, never a crash:

========================  ==========================================================================
limit                     answer
========================  ==========================================================================
``max_body_bytes``        413 (the body is not read further)
``max_sentences``         413 (too many sentences in one request)
``max_chars``             the sentence is cut to that many characters; the response's ``warnings`` say so
``max_beam``              422 (beam outside 1..max_beam, or n-best outside 1..beam)
``max_request_cost``      413 (beam × the source and constraint pieces of all its sentences: the work one request may
                          ask for)
``request_timeout_s``     504; the request leaves the queue at once, and its search stops before its next step
``max_queue_sentences``   503 with ``Retry-After`` (the queue of sentences waiting for the search is full)
``read_timeout_s``        408 for a body not received by then; a connection without a complete request head (or
                          idle after a response) by then is closed
:data:`MAX_HEAD_BYTES`    431 (request line and headers larger than 16 KiB; not a flag)
========================  ==========================================================================

A SIGTERM or SIGINT stops the server within ``read_timeout_s + request_timeout_s`` seconds whatever the clients
do (the requests in flight are answered meanwhile); a second signal stops it at once.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from adlnmt.bounds import POSITIVE, Bounds, at_least
from adlnmt.errors import UserError
from adlnmt.flags import OneModel, option, out_of_bounds
from adlnmt.inference.engine import ENGINE_CHOICES as ENGINES
from adlnmt.inference.translator import PRECISIONS
from adlnmt.store.atomic import path_flag

MAX_HEAD_BYTES = 16 * 1024  # request line and headers: h11's limit on a head arriving in parts, kept for whole ones


def _host_names(text: str) -> tuple[str, ...]:
    """``--allowed-hosts``: comma-separated names (none, or an empty one: refused by :class:`ServeOptions`)."""
    return tuple(host.strip() for host in text.split(",")) if text.strip(" ,") else ()


@dataclass(frozen=True)
class ServeOptions:
    """The model to serve, where, how requests are batched, and the limits on requests; each field declares its
    flag of ``adlnmt serve`` (:mod:`adlnmt.flags`; their ranges are checked here, all problems in one message)."""

    model: str = option(
        help="model directory, or an export directory (adlnmt export)", parse=path_flag, action=OneModel
    )
    """Model directory (or an export directory, ``adlnmt export``)."""
    host: str = option("127.0.0.1", "address to listen on (default %(default)s)")
    """Address to listen on (loopback by default: put a reverse proxy in front to expose it)."""
    allowed_hosts: tuple[str, ...] | None = option(
        None,
        "comma-separated Host header names answered, * for any (default: --host, localhost, 127.0.0.1, ::1)",
        parse=_host_names,
    )
    """Host header values answered (without port; ``*``: any); None: ``host``, localhost, 127.0.0.1 and ::1 (an
    empty tuple is an error, not that default). Others get 421: a web page of another name resolved to this server
    (DNS rebinding) cannot use it."""
    port: int = option(8000, "TCP port (default %(default)s)", bounds=Bounds(0, 65535))
    """TCP port."""
    checkpoint: str = option("best", "best, last, averaged or a .safetensors path", parse=path_flag)
    """best, last, averaged or a .safetensors path (as in ``adlnmt translate``)."""
    precision: str | None = option(None, "as in adlnmt translate (default: fp32; an export as exported)",
                                   choices=PRECISIONS)  # fmt: skip
    """fp32, bf16, fp16 (CUDA) or int8 (CPU), as in ``adlnmt translate``."""
    engine: str | None = option(None, "as in adlnmt translate (default: the directory's own)", choices=ENGINES)
    """None (torch for a model directory, the export's engine for an export), torch, onnxruntime, ctranslate2 or
    auto, as in ``adlnmt translate``."""
    device: str = option("cpu", "cpu or cuda")
    """cpu or cuda."""
    threads: int = option(0, "engine CPU threads (0: its choice)", bounds=at_least(0))
    """CPU threads of the engine (0: its default, see :func:`adlnmt.inference.engines.engine_threads`)."""
    max_batch_sentences: int = option(
        32,
        "most sentences searched together across requests (default %(default)s; 1: no batching)",
        bounds=at_least(1),
    )
    """The most sentences searched together; requests with the same search options share a batch."""
    max_wait_ms: float = option(
        10.0, "how long a batch waits for more requests (default %(default)s)", bounds=at_least(0)
    )
    """How long the first request of a batch waits for others to join it."""
    max_body_bytes: int = option(1_000_000, "largest request body, else 413 (default %(default)s)", bounds=at_least(64))
    """Largest request body accepted (413 beyond)."""
    max_sentences: int = option(256, "most sentences per request, else 413 (default %(default)s)", bounds=at_least(1))
    """Most sentences in one request (413 beyond)."""
    max_chars: int = option(
        1000, "longer sentences are cut, with a warning in the response (default %(default)s)", bounds=at_least(1)
    )
    """Longer sentences are cut to this many characters, with a warning in the response."""
    max_beam: int = option(16, "largest beam, else 422 (default %(default)s)", bounds=at_least(1))
    """Largest beam a request may ask for (422 beyond)."""
    max_request_cost: int = option(
        150_000, "most work per request, beam × source pieces, else 413 (default %(default)s)", bounds=at_least(1)
    )
    """Most work one request may ask for: beam × the source pieces of all its sentences and the pieces of their
    lexical constraints (:func:`adlnmt.inference.constraints.constraint_pieces`; 413 beyond)."""
    read_timeout_s: float = option(
        10.0,
        "seconds a client has to send a request head, then its body (else 408), or may stay idle (default %(default)s)",
        flag="read_timeout",
        bounds=POSITIVE,
    )
    """Time a client has to send a request head, then its body (408), and to stay idle between requests."""
    request_timeout_s: float = option(
        60.0,
        "seconds before a request gets 504 and its search stops (default %(default)s)",
        flag="request_timeout",
        bounds=POSITIVE,
    )
    """A request not answered by then gets 504 (its search stops)."""
    max_queue_sentences: int = option(
        2048, "sentences waiting for the search, else 503 with Retry-After (default %(default)s)", bounds=at_least(1)
    )
    """Sentences waiting for the search; a request that would exceed it gets 503 with Retry-After."""

    def host_allowed(self, header: str) -> bool:
        """Whether a request with this ``Host`` header is answered (see ``allowed_hosts``)."""
        name = header.strip().lower()
        name = name[1 : name.find("]")] if name.startswith("[") else name.rsplit(":", 1)[0] if ":" in name else name
        allowed = self.allowed_hosts if self.allowed_hosts is not None else (self.host, "localhost", "127.0.0.1", "::1")
        return "*" in allowed or name in {host.lower().strip("[]") for host in allowed}

    def loopback_only_note(self) -> str | None:
        """What to say at start-up when ``host`` is every address (0.0.0.0, ::) but, without ``allowed_hosts``, only
        the loopback names are answered: a client on another machine names this one otherwise and gets 421."""
        try:
            every_address = ipaddress.ip_address(self.host.strip("[]")).is_unspecified
        except ValueError:  # a host name
            return None
        if not every_address or self.allowed_hosts is not None:
            return None
        return (f"note: --host {self.host} listens on every address, but without --allowed-hosts only requests naming "
                "this server localhost, 127.0.0.1 or ::1 are answered (others get 421); give --allowed-hosts with the "
                "names clients use, or * for any")  # fmt: skip

    @property
    def shutdown_timeout_s(self) -> float:
        """The longest a SIGTERM waits for the requests in flight: their body, then their search."""
        return self.read_timeout_s + self.request_timeout_s

    def __post_init__(self) -> None:
        problems = out_of_bounds(self)
        if self.allowed_hosts == ():
            problems.append("--allowed-hosts: give at least one host (a name, or * for any); leave it out to answer "
                            "--host and the loopback names")  # fmt: skip
        elif self.allowed_hosts is not None and "" in self.allowed_hosts:
            problems.append(f"--allowed-hosts {','.join(self.allowed_hosts)!r}: an empty name in the list (an unset "
                            "shell variable?)")  # fmt: skip
        if self.max_queue_sentences < self.max_sentences:
            problems.append(
                f"--max-queue-sentences ({self.max_queue_sentences}) must be at least --max-sentences "
                f"({self.max_sentences}), or a full-size request could never be queued"
            )
        if self.precision is not None and self.precision not in PRECISIONS:
            problems.append(f"unknown --precision '{self.precision}'; choose one of {', '.join(PRECISIONS)}")
        if self.engine is not None and self.engine not in ENGINES:
            problems.append(f"unknown --engine '{self.engine}'; choose one of {', '.join(ENGINES)}")
        if problems:
            raise UserError("; ".join(problems))

    def public(self) -> dict[str, float | int]:
        """The limits a client may want to know (``GET /health``)."""
        names = ("max_batch_sentences", "max_wait_ms", "max_body_bytes", "max_sentences", "max_chars", "max_beam",
                 "max_request_cost", "request_timeout_s", "max_queue_sentences", "read_timeout_s")  # fmt: skip
        return {name: getattr(self, name) for name in names}
