"""The options of ``adlnmt serve`` are checked with one message; the request timeout is a 504 and a full queue a
503 with Retry-After, and neither leaves the server unable to answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from adlnmt.errors import UserError
from adlnmt.inference.search import SearchOptions
from adlnmt.inference.translator import Translation, Translator
from adlnmt.serve.limits import ServeOptions
from serve.server import ClientFactory


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_batch_sentences": 0}, "--max-batch-sentences must be >= 1, got 0"),
        ({"port": 70000}, "--port must be in [0, 65535], got 70000"),
        ({"max_wait_ms": -1}, "--max-wait-ms must be >= 0, got -1"),
        ({"max_wait_ms": float("nan")}, "--max-wait-ms must be a finite number >= 0, got nan"),
        ({"request_timeout_s": 0}, "--request-timeout must be > 0, got 0"),
        ({"max_queue_sentences": 10}, "--max-queue-sentences (10) must be at least --max-sentences (256)"),
        ({"precision": "fp8"}, "unknown --precision 'fp8'; choose one of fp32, bf16, fp16, int8"),
        ({"engine": "tvm", "threads": -2}, "--threads must be >= 0, got -2; unknown --engine 'tvm'"),
    ],
)
def test_bad_options_are_one_user_error(limits: dict, message: str) -> None:
    with pytest.raises(UserError) as caught:
        ServeOptions(model="m", **limits)
    assert message in str(caught.value)


class HeldTranslator:
    """The tiny model's translator, each search held until the test sets ``release`` (``searching``: one began).
    ``hold()`` closes the gate (after the server's start-up probe has searched)."""

    def __init__(self, inner: Translator) -> None:
        self.inner = inner
        self.searching, self.release = threading.Event(), threading.Event()
        self.release.set()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def hold(self) -> None:
        self.searching.clear()
        self.release.clear()

    def search_encoded(self, lines: Sequence[list[int] | None], options: SearchOptions,
                       prefixes: Sequence[str] | None = None) -> list[list[Translation]]:  # fmt: skip
        self.searching.set()
        self.release.wait(60)
        return self.inner.search_encoded(lines, options, prefixes)


def test_a_slow_request_gets_504_and_the_server_goes_on(
    make_client: ClientFactory, translator: Translator, test_lines: list[str]
) -> None:
    held = HeldTranslator(translator)
    with make_client(held, request_timeout_s=0.3) as client:
        held.hold()
        reply = client.post("/translate", json={"text": test_lines[:2]})
        assert not held.release.is_set() and held.searching.is_set()  # answered while its search was still held
        assert (reply.status_code, reply.json()) == (504, {"error": "not translated within the server's 0.3 s"})
        held.release.set()
        assert client.get("/health").status_code == 200
    with make_client(held, request_timeout_s=5) as client:
        assert client.post("/translate", json={"text": test_lines[:2]}).status_code == 200


def test_a_full_queue_is_503_with_retry_after(
    make_client: ClientFactory, translator: Translator, test_lines: list[str]
) -> None:
    held = HeldTranslator(translator)
    with make_client(held, max_sentences=4, max_queue_sentences=4, max_wait_ms=1) as client:
        held.hold()  # after the start-up probe for alignments (GET /model) has searched

        def post(lines: list[str]) -> tuple[int, dict, str | None]:
            reply = client.post("/translate", json={"text": lines, "beam": 1})
            return reply.status_code, reply.json(), reply.headers.get("retry-after")

        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(post, test_lines[:1])  # searched, held there
            assert held.searching.wait(60)
            second = pool.submit(post, test_lines[:4])  # waits: the queue is full
            deadline = time.monotonic() + 60
            while client.get("/health").json()["batching"]["queued_sentences"] < 4:
                assert time.monotonic() < deadline, "the second request never queued"
                time.sleep(0.02)
            status, body, retry_after = post(test_lines[:1])
            assert (status, retry_after) == (503, "1")
            assert body["error"] == "server busy: 4 sentences are waiting; the queue takes 4; retry later"
            held.release.set()
            assert first.result()[0] == second.result()[0] == 200
        assert post(test_lines[:1])[0] == 200
