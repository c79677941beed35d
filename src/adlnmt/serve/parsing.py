"""From the raw bytes of a ``POST /translate`` to a checked :class:`TranslateRequest`, or an :class:`ApiError` with
the status code and message the client gets: 415 (not declared as JSON, or in a charset other than UTF-8), 413 (body
or sentence count too large), 408 (body too slow), 400 (not UTF-8, not JSON: NaN and Infinity included), 422 (wrong
fields or types, a lone surrogate, beam or n-best out of range)."""

from __future__ import annotations

import asyncio
import codecs
from typing import Any

from pydantic import ValidationError
from starlette.requests import ClientDisconnect, Request

from adlnmt.jsontext import JsonError, LoneSurrogate, parse_json, type_name
from adlnmt.serve.limits import ServeOptions
from adlnmt.serve.schema import TranslateRequest


class ApiError(Exception):
    """An answer other than 200: status code, message, optional headers and details (pydantic's errors), and for
    a 500 the id of the server's log line about it."""

    def __init__(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        detail: list[dict] | None = None,
        error_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.detail = detail
        self.error_id = error_id

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.message}
        if self.detail is not None:
            body["detail"] = self.detail
        if self.error_id is not None:
            body["error_id"] = self.error_id
        return body


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed ``limit`` bytes (by its Content-Length
    header, or while it streams in), and with 408 when it has not arrived within ``timeout`` seconds."""
    try:
        return await asyncio.wait_for(_read_body(request, limit), timeout)
    except TimeoutError:
        raise ApiError(408, f"request body not received within the server's {timeout:g} s") from None
    except ClientDisconnect:  # the answer goes nowhere; no traceback in the log
        raise ApiError(400, "the client disconnected before sending its body") from None


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise ApiError(400, f"invalid Content-Length header {declared[:40]!r}")
        if int(declared) > limit:
            raise ApiError(
                413, f"request body of {int(declared):,} bytes exceeds the server's limit of {limit:,} bytes"
            )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body exceeds the server's limit of {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def check_content_type(request: Request) -> None:
    """415 unless the request says its body is JSON (a web page can post text/plain to any server, without asking
    it first: requiring application/json makes browsers ask, and refuse other origins) and, if it names a charset,
    UTF-8 or its subset US-ASCII (JSON is UTF-8, RFC 8259: a latin-1 body would be read wrong in silence)."""
    media_type, *parameters = request.headers.get("content-type", "").split(";")
    media_type = media_type.strip().lower()
    if media_type != "application/json":
        raise ApiError(415, f"expected Content-Type: application/json, got {media_type[:60] or 'none'!r}")
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and not _is_utf8(charset := value.strip().strip('"')):
            raise ApiError(415, f"expected a UTF-8 body (JSON is UTF-8, RFC 8259), got charset {charset[:60]!r} in "
                           "the Content-Type header; send UTF-8, with charset=utf-8 or none")  # fmt: skip


def _is_utf8(charset: str) -> bool:
    """Whether a body in ``charset`` (any of Python's names for it) reads as UTF-8: UTF-8 itself or US-ASCII."""
    try:
        return codecs.lookup(charset).name in ("utf-8", "ascii")
    except LookupError:
        return False


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "body"


def parse_translate(body: bytes, options: ServeOptions) -> TranslateRequest:
    """The request in ``body`` (UTF-8 JSON), checked against the schema and the server's limits."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ApiError(
            400, f"request body is not valid UTF-8 (byte {err.start}: {body[err.start : err.start + 1]!r})"
        ) from None
    try:
        data = parse_json(text, non_finite=False)  # RFC 8259: no NaN or Infinity
    except LoneSurrogate as err:  # JSON's "\ud800" escapes: not a character, no tokenizer takes it
        raise ApiError(422, f"invalid request: {err}") from None
    except JsonError as err:
        raise ApiError(400, f"request body is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ApiError(422, f'expected a JSON object like {{"text": ["..."]}}, got {type_name(data)}')
    text_field = data.get("text")
    if isinstance(text_field, list) and len(text_field) > options.max_sentences:
        raise ApiError(
            413, f"{len(text_field):,} sentences in one request; the server takes at most {options.max_sentences:,}"
        )
    try:
        request = TranslateRequest.model_validate(data)
    except ValidationError as err:
        errors = err.errors(include_url=False, include_context=False, include_input=False)
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ApiError(
            422,
            f"invalid request: {_location(first['loc'])}: {first['msg'].removeprefix('Value error, ')}{more}",
            detail=errors,
        ) from None
    if request.beam > options.max_beam:
        raise ApiError(422, f"invalid request: beam {request.beam} exceeds the server's max_beam {options.max_beam}")
    return request


def cut_long(lines: list[str], max_chars: int, what: str = "input line") -> tuple[list[str], list[str | None]]:
    """``lines`` with each cut to ``max_chars`` characters, and per line the warning saying so (None if not cut);
    ``what`` names a line in the warning (``input line``, ``prefix of line``)."""
    cut: list[str] = []
    warnings: list[str | None] = []
    for number, line in enumerate(lines, 1):
        too_long = len(line) > max_chars
        warnings.append(f"{what} {number}: {len(line):,} characters cut to {max_chars:,} (the server's limit)"
                        if too_long else None)  # fmt: skip
        cut.append(line[:max_chars] if too_long else line)
    return cut, warnings
