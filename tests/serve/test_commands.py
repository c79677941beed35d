"""``adlnmt serve`` as a command: bad input is one message and status 2; a real server, sent SIGTERM (or Ctrl-C's
SIGINT) while it searches, still answers the request in flight and exits with status 0 (130)."""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path

import httpx2
import pytest

from adlnmt.cli import main
from serve.server import running_server

SLOW_TEXT = [("ein kleiner Hund läuft über die grüne Wiese und ein Mann sieht ihm zu . " * 14)[:1000]] * 24


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-sentences", "0"], "error: --max-sentences must be >= 1, got 0"),
        (["--port", "70000", "--max-wait-ms", "-1"],
         "error: --port must be in [0, 65535], got 70000; --max-wait-ms must be >= 0, got -1.0"),
        (["--allowed-hosts", " , "], "error: --allowed-hosts: give at least one host (a name, or * for any); "
         "leave it out to answer --host and the loopback names"),  # never the default in silence
        (["--allowed-hosts", "mt.example.org,,localhost"],
         "error: --allowed-hosts 'mt.example.org,,localhost': an empty name in the list (an unset shell variable?)"),
    ],
)  # fmt: skip
def test_bad_input_is_one_message_and_status_2(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--model", str(tmp_path), *flags]) == 2  # the options are checked before the model
    assert capsys.readouterr().err == message + "\n"


def test_a_damaged_model_directory_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert main(["serve", "--model", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'config.json'}: malformed")


def test_a_missing_model_directory_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--model", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nowhere'}: not a model directory (no config.json)\n"


@pytest.mark.parametrize(("stop", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_signal_finishes_the_request_in_flight_then_exits(
    stop: signal.Signals, status: int, serve_model: Path, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    with running_server(serve_model, log=log) as (process, url):
        replies: list[httpx2.Response] = []
        request = threading.Thread(
            target=lambda: replies.append(
                httpx2.post(f"{url}/translate", json={"text": SLOW_TEXT, "beam": 8}, timeout=300)
            )
        )
        request.start()
        deadline = time.monotonic() + 30
        while httpx2.get(f"{url}/health").json()["batching"]["searching_sentences"] == 0:
            assert time.monotonic() < deadline, "the request never reached the search"
            time.sleep(0.02)
        process.send_signal(stop)
        started = time.monotonic()
        request.join(300)
        assert process.wait(60) == status, log.read_text()
    assert time.monotonic() - started > 0.2, "the request was not in flight when the signal came"
    assert len(replies) == 1 and replies[0].status_code == 200, log.read_text()
    assert len(replies[0].json()["translations"]) == len(SLOW_TEXT)
    text = log.read_text()
    assert "Shutting down" in text and "Finished server process" in text and "Traceback" not in text


def stalled_body(url: str) -> socket.socket:
    """A connection that sends a request head announcing 30 bytes of body, then one byte, then nothing."""
    host, port = url.removeprefix("http://").split(":")
    client = socket.create_connection((host, int(port)), timeout=120)
    client.sendall(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 30\r\n\r\n{")  # fmt: skip
    return client


def wait_for_line(log: Path, text: str) -> None:
    deadline = time.monotonic() + 60
    while text not in log.read_text():
        assert time.monotonic() < deadline, f"{text!r} never logged: {log.read_text()}"
        time.sleep(0.05)


def test_a_stalled_body_is_408_and_cannot_hold_a_stop(serve_model: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with running_server(serve_model, "--read-timeout", "1", "--request-timeout", "5", log=log) as (process, url):
        client = stalled_body(url)
        reply = b"".join(iter(lambda: client.recv(4096), b""))  # until the server closes the connection
        assert reply.startswith(b"HTTP/1.1 408 ") and b'"error":"request body not received within' in reply
        second = stalled_body(url)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log.read_text()
        second.close()
        client.close()
    assert "Traceback" not in log.read_text()


def test_a_connection_without_a_complete_request_head_is_closed(serve_model: Path, tmp_path: Path) -> None:
    with running_server(serve_model, "--read-timeout", "1") as (_, url):
        host, port = url.removeprefix("http://").split(":")
        idle = socket.create_connection((host, int(port)), timeout=60)
        partial = socket.create_connection((host, int(port)), timeout=60)
        partial.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert idle.recv(4096) == b"" and partial.recv(4096) == b""  # closed by the server
        idle.close()
        partial.close()


@pytest.mark.parametrize(("stop", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_second_signal_stops_at_once(stop: signal.Signals, status: int, serve_model: Path, tmp_path: Path) -> None:
    """The first signal waits for the request in flight (its body may take up to --read-timeout, 300 s here); the
    second does not wait, and the exit is clean."""
    log = tmp_path / "serve.log"
    with running_server(serve_model, "--read-timeout", "300", log=log) as (process, url):
        client = stalled_body(url)
        process.send_signal(stop)
        wait_for_line(log, "Shutting down")
        process.send_signal(stop)
        assert process.wait(60) == status, log.read_text()
        client.close()
    assert "Traceback" not in log.read_text(), log.read_text()


def test_a_port_in_use_is_one_message_and_status_2(serve_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The port is bound before the server says it serves: a port in use (or a host that is not this machine's) is
    one message naming --host and --port, status 2, not uvicorn's log line and status 3 after 'serving ...'."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--model", str(serve_model), "--port", str(port), "--threads", "1"]) == 2
    assert (
        capsys.readouterr().err
        == f"error: --host 127.0.0.1 --port {port}: cannot listen there (Address already in use)\n"
    )
    assert main(["serve", "--model", str(serve_model), "--host", "no-such-host.invalid", "--threads", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: --host no-such-host.invalid --port 8000: cannot listen there (")


def test_port_0_listens_on_one_free_port_it_names() -> None:
    from adlnmt.serve.server import listening_sockets

    sockets = listening_sockets("127.0.0.1", 0)
    try:
        assert len(sockets) == 1 and sockets[0].getsockname()[1] > 0
    finally:
        for sock in sockets:
            sock.close()
