"""The FastAPI application of ``adlnmt serve``: ``POST /translate`` (batched across requests, :mod:`.batching`),
``GET /health``, ``GET /model``, the web page at ``/`` and an offline API page at ``/docs`` (``/openapi.json``).

Every error is JSON ``{"error": message}`` with the status codes listed in :mod:`adlnmt.serve.limits`; an
unexpected failure of the search is a 500 for the requests of its batch, never a crash of the server. A 500 says
nothing of the failure but an ``error_id``, which the server's log line with the traceback names too.

Each line is subword-encoded once: the cost check, the warnings, the search and the alignment's source pieces all
read those ids. The warnings (lines cut to ``max_chars`` or to the model's input limit) are numbered by the request's
own lines, returned in the response and logged; the search of the merged batch prints none."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from itertools import compress
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from adlnmt.errors import UserError
from adlnmt.inference.constraints import EncodedConstraints, constraint_pieces
from adlnmt.inference.options import DEFAULT_OPTIONS, SearchOptions, SearchStopped
from adlnmt.inference.prefixes import prefix_notes
from adlnmt.inference.translator import EncodedLine, Translation, Translator
from adlnmt.serve.batching import Batcher, QueueFull
from adlnmt.serve.limits import MAX_HEAD_BYTES, ServeOptions
from adlnmt.serve.model_info import model_description
from adlnmt.serve.parsing import ApiError, check_content_type, cut_long, parse_translate, read_body
from adlnmt.serve.schema import ErrorResponse, TranslateRequest, TranslateResponse
from adlnmt.version import __version__

STATIC = Path(__file__).resolve().parent / "static"
LOG = logging.getLogger("adlnmt.serve")
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in (
        (400, "body not UTF-8 or not JSON"),
        (408, "body not received within read_timeout_s"),
        (413, "body larger than max_body_bytes, more than max_sentences sentences, or costlier than max_request_cost"),
        (415, "Content-Type not application/json, or a charset other than UTF-8"),
        (421, "Host header not in --allowed-hosts"),
        (422, "wrong fields or types; beam above max_beam; nbest above beam; alignments from an engine without"),
        (500, "the search or the server failed; error_id: in the server's log, with the cause"),
        (503, "the queue is full (see Retry-After)"),
        (504, "not translated within request_timeout_s"),
    )
}


class Service:
    """The loaded model, the batcher and the limits behind the routes."""

    def __init__(self, options: ServeOptions, translator: Translator) -> None:
        self.options = options
        self.translator = translator
        self.batcher = Batcher(
            translator.search_encoded, options.max_batch_sentences, options.max_wait_ms, options.max_queue_sentences
        )
        self.model_info: dict[str, Any] | None = None

    def describe_model(self) -> dict[str, Any]:
        """The ``GET /model`` record, computed once (at start-up), with ``alignments``: whether the engine gives them
        (its capabilities; CTranslate2 does not)."""
        if self.model_info is None:
            path = Path(self.options.model)
            info = model_description(self.translator, path, self.options.checkpoint, self.options.precision)
            info["alignments"] = self.translator.engine.capabilities.alignments
            self.model_info = info
        return self.model_info

    def sentence_result(
        self, line: str, encoded: EncodedLine | None, hyps: list[Translation], alignments: bool
    ) -> dict[str, Any]:
        """One entry of the response's ``translations`` (see :class:`~adlnmt.serve.schema.SentenceResult`)."""
        nbest = [hyp.to_dict() for hyp in hyps]
        best = nbest[0] if nbest else {"translation": "", "score": None, "log_prob": None, "pieces": []}
        result = {"source": line, **best, "nbest": nbest}
        if alignments:
            result.setdefault("alignment", None)
            result["source_pieces"] = self.translator.source_pieces(encoded.ids) if hyps and encoded else None
        return result

    async def translate(self, request: TranslateRequest) -> dict[str, Any]:
        """The response to a checked request: cut long lines (with warnings), search in a shared batch, format."""
        if request.alignments and not self.translator.engine.capabilities.alignments:
            raise ApiError(422, f"invalid request: the {self.translator.engine_name} engine gives no alignments")
        deadline = time.monotonic() + self.options.request_timeout_s
        lines, cut = cut_long(request.text, self.options.max_chars)
        encoded = [self.translator.encode_line(line) if line.strip() else None for line in lines]
        prefixes, prefix_ids, prefix_warnings = self.cut_prefixes(request.prefix, encoded)
        wanted = None if request.constraints is None else [c and c.to_constraints() for c in request.constraints]
        lexical, constraint_warnings = self.translator.encode_constraints(wanted)
        self.check_cost(encoded, request.beam, prefix_ids, lexical)
        options = SearchOptions(beam=request.beam, nbest=request.nbest, batch_size=self.options.max_batch_sentences,
                                alignments=request.alignments)  # fmt: skip
        self.check_search(options, encoded, prefix_ids, lexical)
        warnings = (
            [
                warning
                for number, (line, cut_warning) in enumerate(zip(encoded, cut, strict=True), 1)
                for warning in (cut_warning, line and self.translator.input_warning(line, number))
                if warning
            ]
            + prefix_warnings
            + constraint_warnings
        )
        if warnings:
            LOG.warning("a request of %d line(s): %s", len(lines), "; ".join(warnings))
        timeout = f"not translated within the server's {self.options.request_timeout_s:g} s"
        try:
            ids = [line.ids if line else None for line in encoded]
            found = await asyncio.wait_for(self.batcher.submit(ids, options, deadline, prefixes, lexical),
                                           deadline - time.monotonic())  # fmt: skip
        except (TimeoutError, SearchStopped):
            raise ApiError(504, timeout) from None
        except QueueFull as err:
            raise ApiError(503, f"server busy: {err}; retry later", {"Retry-After": "1"}) from None
        except UserError as err:  # the request asks for something this model or engine cannot do
            raise ApiError(422, f"invalid request: {err}") from None
        except Exception as err:
            raise internal_error("search failed", "translation failed", err) from None
        warnings += self.translator.unmet_warnings(lexical, found)
        results = [
            self.sentence_result(line, source, hyps, request.alignments)
            for line, source, hyps in zip(lines, encoded, found, strict=True)
        ]
        return {"translations": results, "warnings": warnings}

    def cut_prefixes(
        self, prefixes: list[str] | None, encoded: list[EncodedLine | None]
    ) -> tuple[list[str] | None, list[list[int]], list[str]]:
        """The request's target prefixes cut to ``max_chars``, their pieces, and the warnings of their lines (cut to
        ``max_chars``, or to the model's output limit by the search; the edge cases of
        :mod:`adlnmt.inference.prefixes`), in line order."""
        if prefixes is None:
            return None, [], []
        cut, cut_warnings = cut_long(prefixes, self.options.max_chars, "prefix of line")
        vocab = self.translator.data.tgt_vocab
        ids = [vocab.encode(prefix) if prefix.strip() else [] for prefix in cut]
        sources = [line.ids if line else None for line in encoded]
        notes = prefix_notes(vocab, sources, cut, ids, DEFAULT_OPTIONS)  # the server's length limit is the default
        warnings = [(number, warning) for number, warning in enumerate(cut_warnings, 1) if warning]
        warnings += [(note.line, note.line_warning()) for note in notes]
        too_long = (self.translator.target_warning(piece_ids, number, "prefix of") for number, piece_ids in
                    enumerate(ids, 1))  # fmt: skip
        warnings += [(number, warning) for number, warning in enumerate(too_long, 1) if warning]
        return cut, ids, [warning for _, warning in sorted(warnings, key=lambda pair: pair[0])]

    def check_search(
        self,
        options: SearchOptions,
        encoded: list[EncodedLine | None],
        prefixes: list[list[int]],
        constraints: list[EncodedConstraints | None] | None,
    ) -> None:
        """422, before the request is queued, for what its search asks that the engine or model cannot give (a
        target prefix or constraints on a non-empty sentence on an engine without them, a beam wider than the target
        vocabulary): the search of a batch fails every request merged into it."""
        try:
            self.translator.check(options, any(compress(prefixes, encoded)),
                                  constraints=any(compress(constraints or [], encoded)), beam_name="beam")  # fmt: skip
        except UserError as err:
            raise ApiError(422, f"invalid request: {err}") from None

    def check_cost(
        self,
        encoded: list[EncodedLine | None],
        beam: int,
        prefixes: Sequence[list[int]] = (),
        constraints: list[EncodedConstraints | None] | None = None,
    ) -> None:
        """413 when the request asks for more work than ``max_request_cost``: beam × its pieces (each sentence's
        source, cut to the model's input limit, plus EOS; its target prefix: the search forces every piece of it; and
        its constraint pieces, :func:`constraint_pieces`)."""
        limit = self.translator.max_input_len
        pieces = sum(min(line.pieces, limit) + 1 for line in encoded if line) + sum(map(len, prefixes))
        pieces += sum(constraint_pieces(line) for line in constraints or [])
        if (cost := beam * pieces) > (most := self.options.max_request_cost):
            raise ApiError(413, f"request too costly: beam {beam} × {pieces:,} pieces (sources, prefixes and "
                           f"constraints) = {cost:,} exceeds the server's max_request_cost {most:,}; send fewer or "
                           "shorter sentences, prefixes or constraints, or a smaller beam")  # fmt: skip

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "engine": self.translator.engine_name,
            "batching": asdict(self.batcher.stats),
            "limits": self.options.public(),
        }


def internal_error(logged: str, answered: str, err: BaseException) -> ApiError:
    """A 500 for ``err``: ``answered`` and an error id for the client, nothing of the exception itself; the
    server's log gets ``logged``, the same id and the traceback."""
    error_id = uuid.uuid4().hex[:12]
    LOG.error("%s (error id %s)", logged, error_id, exc_info=err)
    return ApiError(500, f"{answered} (error id {error_id}: the server's log says why)", error_id=error_id)


class HeadAsGet:
    """ASGI middleware: a HEAD request is handled as a GET (every page, ``/health``, ``/model``); the server
    sends the response's head only (uvicorn drops the body of an answer to HEAD)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "HEAD":
            scope = {**scope, "method": "GET"}
        await self.app(scope, receive, send)


def create_app(options: ServeOptions, translator: Translator | None = None) -> FastAPI:
    """The application serving ``options.model`` (or ``translator``, already loaded, e.g. by tests)."""
    if translator is None:
        translator = Translator.load(options.model, options.checkpoint, options.device, options.precision,
                                     options.engine, threads=options.threads)  # fmt: skip
    service = Service(options, translator)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await service.batcher.start()
        await asyncio.to_thread(service.describe_model)  # the diagram once, before the first request
        yield
        await service.batcher.stop()

    app = FastAPI(
        title="adlnmt",
        version=__version__,
        summary="Neural machine translation whose architectures are ADL sentences",
        docs_url=None,  # FastAPI's pages load their scripts from a CDN; /docs is served offline below
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.service = service
    app.add_middleware(HeadAsGet)

    @app.exception_handler(ApiError)
    async def api_error(_: Request, err: ApiError) -> JSONResponse:
        return JSONResponse(err.body(), err.status, headers=err.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(err.detail)}, err.status_code, headers=err.headers)

    @app.exception_handler(Exception)
    async def unexpected_error(_: Request, err: Exception) -> JSONResponse:
        """Any other failure: a JSON 500 without internals (the traceback goes to the server's log)."""
        error = internal_error("request failed", "internal server error", err)
        return JSONResponse(error.body(), error.status)

    @app.middleware("http")
    async def known_hosts_only(request: Request, call_next: Any) -> Any:
        """431 for a request head over ``MAX_HEAD_BYTES`` (one that arrives in parts gets it from the server,
        :mod:`.server`); 421 for a Host header not in ``--allowed-hosts`` (DNS rebinding: browsers always send one,
        so an HTTP/1.0 request without Host is answered)."""
        scope = request.scope
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        head += sum(len(name) + len(value) + 4 for name, value in request.headers.raw)
        if head > MAX_HEAD_BYTES:
            return JSONResponse({"error": f"request head larger than the server's limit of {MAX_HEAD_BYTES:,} bytes"},
                                431, headers={"Connection": "close"})  # fmt: skip
        host = request.headers.get("host")
        if host is not None and not options.host_allowed(host):
            return JSONResponse({"error": "this server does not answer that Host name (see --allowed-hosts)"}, 421)
        return await call_next(request)

    schema = TranslateRequest.model_json_schema()
    body_doc = {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}

    @app.post("/translate", responses={200: {"model": TranslateResponse}, **ERRORS}, openapi_extra=body_doc)
    async def translate(request: Request) -> JSONResponse:
        """Translate ``text`` (a list of sentences) with beam search; results in input order. The body is parsed
        here, not by FastAPI, so that bad bytes and bad JSON are a 400 and oversized bodies a 413."""
        check_content_type(request)
        body = await read_body(request, options.max_body_bytes, options.read_timeout_s)
        return JSONResponse(await service.translate(parse_translate(body, options)))

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness, batching counters and the server's limits."""
        return service.health()

    @app.get("/model")
    async def model() -> dict[str, Any]:
        """Canonical ADL, parameters, vocabularies, training summary and the architecture diagram (SVG)."""
        return await asyncio.to_thread(service.describe_model)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> FileResponse:
        return FileResponse(STATIC / "docs.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
