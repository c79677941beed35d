"""HTTP as clients send it, on a real server: HTTP/1.0 without a Host header is answered, HEAD gets the head of
GET's answer, a request head over 16 KiB gets 431 (also when it arrives in parts), never a connection reset."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from adlnmt.serve.limits import MAX_HEAD_BYTES
from serve.server import running_server


def exchange(url: str, request: bytes, part: int | None = None) -> bytes:
    """Send ``request`` (in parts of ``part`` bytes, or at once), then read the answer until the server closes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as client:
        for start in range(0, len(request), part or len(request)):
            client.sendall(request[start : start + (part or len(request))])
        return b"".join(iter(lambda: client.recv(65536), b""))


def status_and_body(answer: bytes) -> tuple[int, bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def test_http_details(serve_model: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with running_server(serve_model, log=log) as (_, url):
        old = exchange(url, b"GET /health HTTP/1.0\r\n\r\n")
        head_page = exchange(url, b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        head_health = exchange(url, b"HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        big = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: %s\r\nConnection: close\r\n\r\n"
        in_parts = exchange(url, big % (b"a" * 100_000), part=4096)
        at_once = exchange(url, big % (b"a" * (MAX_HEAD_BYTES + 10)))
        wrong_host = exchange(url, b"GET /health HTTP/1.0\r\nHost: attacker.example\r\n\r\n")
    assert status_and_body(old)[0] == 200 and json.loads(status_and_body(old)[1])["status"] == "ok"
    assert head_page.startswith(b"HTTP/1.1 200 ") and b"content-type: text/html" in head_page.lower()
    assert status_and_body(head_page)[1] == b"" and status_and_body(head_health) == (200, b"")
    message = {"error": f"request head larger than the server's limit of {MAX_HEAD_BYTES:,} bytes"}
    for answer in (in_parts, at_once):
        status, body = status_and_body(answer)
        assert (status, json.loads(body)) == (431, message), answer[:200]
    assert status_and_body(wrong_host)[0] == 421
    assert "Traceback" not in log.read_text()
