"""``adlnmt serve`` as a command: bad input is one message and status 2; a real server, sent SIGTERM (or Ctrl-C's
SIGINT) while it searches, still answers the request in flight and exits with status 0 (130)."""

from __future__ import annotations

import signal
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
