"""What the server shows and whom it answers: errors are JSON with a message and no internals (no exception text,
no interpreter settings, no paths on the server's disk); POST bodies must be declared as JSON; only the allowed
Host names are answered (DNS rebinding)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from adlnmt.inference.search import SearchOptions
from adlnmt.inference.translator import EncodedLine, Translation, Translator
from adlnmt.serve.limits import ServeOptions
from serve.server import ClientFactory

INTERNALS = "/onnxruntime/core/providers/cpu/math/gemm.cc:42 shape [3, 4] vs [5, 6]"


class Failing:
    """The tiny model's translator whose ``method`` raises an exception full of internals."""

    def __init__(self, inner: Translator, method: str) -> None:
        self.inner, self.method = inner, method

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def fail(self, *args: object) -> None:
        raise RuntimeError(INTERNALS)

    def search_encoded(self, lines: Sequence[list[int] | None], options: SearchOptions,
                       prefixes: Sequence[str] | None = None) -> list[list[Translation]]:  # fmt: skip
        if self.method == "search":
            self.fail()
        return self.inner.search_encoded(lines, options, prefixes)

    def input_warning(self, line: EncodedLine, number: int) -> str | None:
        if self.method == "input_warning":
            self.fail()
        return self.inner.input_warning(line, number)


@pytest.mark.parametrize(
    ("method", "message"),
    [("search", "translation failed"), ("input_warning", "internal server error")],
)
def test_a_failure_is_json_without_internals_and_names_its_log_line(
    make_client: ClientFactory, translator: Translator, test_lines: list[str], method: str, message: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    with caplog.at_level(logging.ERROR, logger="adlnmt.serve"), make_client(Failing(translator, method)) as client:
        replies = [client.post("/translate", json={"text": test_lines[:2]}) for _ in range(2)]
        assert client.get("/health").status_code == 200
    for reply in replies:
        assert reply.status_code == 500 and reply.headers["content-type"] == "application/json"
        body = reply.json()
        assert body == {"error": f"{message} (error id {body['error_id']}: the server's log says why)",
                        "error_id": body["error_id"]}  # fmt: skip
        assert "gemm" not in reply.text
        (logged,) = [record for record in caplog.records if body["error_id"] in record.getMessage()]
        assert logged.exc_info is not None and str(logged.exc_info[1]) == INTERNALS  # the cause, in the log only
    assert replies[0].json()["error_id"] != replies[1].json()["error_id"]


def test_health_and_model_show_no_path(make_client: ClientFactory, serve_model: Path) -> None:
    with make_client() as client:
        texts = [client.get(path).text for path in ("/health", "/model")]
    for text in texts:
        assert str(serve_model) not in text and serve_model.name not in text


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "json"])
def test_a_post_not_declared_as_json_is_415(make_client: ClientFactory, content_type: str | None) -> None:
    """A web page may post text/plain or a form to any server without asking first; application/json it may not."""
    headers = {} if content_type is None else {"Content-Type": content_type}
    with make_client() as client:
        reply = client.post("/translate", content=b'{"text": ["ein Hund ."]}', headers=headers)
        accepted = client.post("/translate", content=b'{"text": []}',
                               headers={"Content-Type": "Application/JSON; charset=utf-8"})  # fmt: skip
    assert reply.status_code == 415
    assert reply.json() == {"error": f"expected Content-Type: application/json, got {content_type or 'none'!r}"}
    assert accepted.status_code == 200


@pytest.mark.parametrize("charset", ["latin-1", '"ISO-8859-1"', "utf-16", "no-such-charset", ""])
def test_a_charset_other_than_utf8_is_415(make_client: ClientFactory, charset: str) -> None:
    """JSON is UTF-8 (RFC 8259): a body declared in another charset is refused, not read as UTF-8 in silence."""
    with make_client() as client:
        reply = client.post("/translate", content='{"text": ["café"]}'.encode("latin-1"),
                            headers={"Content-Type": f"application/json; charset={charset}"})  # fmt: skip
        accepted = [client.post("/translate", content=b'{"text": []}',
                                headers={"Content-Type": f"application/json;CHARSET={name}"}).status_code
                    for name in ("UTF-8", '"utf-8"', "us-ascii", "utf8")]  # fmt: skip
    assert reply.status_code == 415
    assert reply.json() == {"error": f"expected a UTF-8 body (JSON is UTF-8, RFC 8259), got charset "
                            f"{charset.strip(chr(34))!r} in the Content-Type header; send UTF-8, with charset=utf-8 or "
                            "none"}  # fmt: skip
    assert accepted == [200] * 4


def test_only_allowed_host_names_are_answered(make_client: ClientFactory) -> None:
    with make_client(allowed_hosts=None) as client:  # the default: the bound address and the loopback names
        rebound = client.get("/health")  # the test client's Host: testserver, like a rebound attacker.example
        posted = client.post("/translate", json={"text": []}, headers={"Host": "attacker.example"})
        local = [client.get("/health", headers={"Host": host}).status_code
                 for host in ("localhost:8000", "127.0.0.1", "[::1]:8000", "LOCALHOST")]  # fmt: skip
    assert (rebound.status_code, posted.status_code) == (421, 421)
    assert rebound.json() == {"error": "this server does not answer that Host name (see --allowed-hosts)"}
    assert local == [200] * 4
    with make_client(allowed_hosts=("*",)) as client:
        assert client.get("/health", headers={"Host": "anything.example"}).status_code == 200


def test_allowed_hosts_default_to_the_bound_address() -> None:
    options = ServeOptions(model="m", host="10.1.2.3")
    assert [options.host_allowed(h) for h in ("10.1.2.3:8000", "localhost", "10.1.2.4", "")] == [
        True, True, False, False]  # fmt: skip
    named = ServeOptions(model="m", host="0.0.0.0", allowed_hosts=("mt.example.org",))
    assert [named.host_allowed(h) for h in ("mt.example.org", "MT.example.org:443", "localhost")] == [
        True, True, False]  # fmt: skip


def test_every_address_without_allowed_hosts_is_noted() -> None:
    """--host 0.0.0.0 (or ::) alone answers only the loopback names: said at start-up, as clients elsewhere get 421."""
    notes = [ServeOptions(model="m", host=host).loopback_only_note() for host in ("0.0.0.0", "::", "10.1.2.3", "a.b")]
    assert notes[0] and notes[0].startswith("note: --host 0.0.0.0 listens on every address, but without --allowed-")
    assert notes[1] and notes[1].startswith("note: --host :: listens") and notes[2:] == [None, None]
    assert ServeOptions(model="m", host="0.0.0.0", allowed_hosts=("*",)).loopback_only_note() is None
