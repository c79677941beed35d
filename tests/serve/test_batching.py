"""Requests merged into shared searches: fewer batches than requests, each request its own results, options never
mixed, batch and queue limits kept, abandoned requests dropped, a failing search failing only its requests."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from adlnmt.inference.options import SearchOptions, SearchStopped
from adlnmt.inference.stepper import Stepper
from adlnmt.inference.translator import Translation, Translator
from adlnmt.serve.batching import Batcher, QueueFull
from serve.server import ClientFactory


def test_concurrent_requests_share_batches_and_get_their_own_translation(
    make_client: ClientFactory, translator: Translator, test_lines: list[str]
) -> None:
    lines = test_lines[:16]
    alone = [translator.translate([line], SearchOptions(beam=3))[0] for line in lines]
    with make_client(max_batch_sentences=16, max_wait_ms=500) as client:
        start = threading.Barrier(len(lines))

        def request(line: str) -> str:
            start.wait()
            reply = client.post("/translate", json={"text": [line], "beam": 3})
            assert reply.status_code == 200, reply.text
            return reply.json()["translations"][0]["translation"]

        with ThreadPoolExecutor(len(lines)) as pool:
            served = list(pool.map(request, lines))
        stats = client.get("/health").json()["batching"]
    assert served == alone
    assert stats["requests"] == stats["sentences"] == 16
    assert stats["batches"] < 16 and stats["largest_batch"] > 1


class RecordingSearch:
    """A search that echoes its lines (``"x"`` → translation ``"X"``) and records the batches it was given."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.batches: list[tuple[list[str], SearchOptions]] = []
        self.fail_on = fail_on

    def __call__(self, lines: Sequence[str], options: SearchOptions) -> list[list[Translation]]:
        self.batches.append((list(lines), options))
        if self.fail_on in lines:
            raise RuntimeError(f"cannot search {self.fail_on!r}")
        return [[Translation(line.upper(), [line.upper()], 0.0, 0.0)] * options.nbest for line in lines]


def run(coroutine_function, search: RecordingSearch, **limits):  # type: ignore[no-untyped-def]
    """``coroutine_function(batcher)`` on a started batcher (limits: max_batch_sentences, max_wait_ms, ...)."""
    settings = {"max_batch_sentences": 8, "max_wait_ms": 50.0, "max_queue_sentences": 100} | limits

    async def main():  # type: ignore[no-untyped-def]
        batcher = Batcher(search, **settings)
        await batcher.start()
        try:
            return await coroutine_function(batcher)
        finally:
            await batcher.stop()

    return asyncio.run(main())


BEAM2, BEAM3 = SearchOptions(beam=2), SearchOptions(beam=3)


class BlockedSearch(RecordingSearch):
    """A search that holds the worker until ``release`` is set (``started``: it has begun)."""

    def __init__(self) -> None:
        super().__init__()
        self.started, self.release = threading.Event(), threading.Event()

    def __call__(self, lines: Sequence[str], options: SearchOptions) -> list[list[Translation]]:
        self.started.set()
        self.release.wait(60)
        return super().__call__(lines, options)


async def until(condition: Callable[[], bool]) -> None:
    """Let the event loop run until ``condition()`` holds (at most 60 s: a loaded machine is slow, never wrong)."""
    await asyncio.wait_for(_poll(condition), 60)


async def _poll(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.001)


def texts(found: list[list[Translation]]) -> list[str]:
    return [hyps[0].text for hyps in found]


def test_only_requests_with_equal_options_share_a_batch() -> None:
    search = RecordingSearch()

    async def requests(batcher: Batcher):  # type: ignore[no-untyped-def]
        return await asyncio.gather(batcher.submit(["a", "b"], BEAM2), batcher.submit(["c"], BEAM3),
                                    batcher.submit(["d"], BEAM2))  # fmt: skip

    results = run(requests, search)
    assert [texts(found) for found in results] == [["A", "B"], ["C"], ["D"]]
    assert sorted((lines, options.beam) for lines, options in search.batches) == [(["a", "b", "d"], 2), (["c"], 3)]


def test_batches_stay_within_max_batch_sentences() -> None:
    search = RecordingSearch()

    async def requests(batcher: Batcher):  # type: ignore[no-untyped-def]
        return await asyncio.gather(*(batcher.submit([f"{i}a", f"{i}b"], BEAM2) for i in range(5)))

    results = run(requests, search, max_batch_sentences=4)
    assert [texts(found) for found in results] == [[f"{i}A", f"{i}B"] for i in range(5)]
    assert [len(lines) for lines, _ in search.batches] == [4, 4, 2]


def test_a_request_larger_than_a_batch_is_searched_whole() -> None:
    search = RecordingSearch()
    lines = [str(i) for i in range(10)]
    found = run(lambda batcher: batcher.submit(lines, BEAM2), search, max_batch_sentences=4)
    assert texts(found) == lines and [len(batch) for batch, _ in search.batches] == [10]


def test_a_lone_request_waits_max_wait_ms_for_company_then_goes_alone() -> None:
    search = RecordingSearch()

    async def timed(batcher: Batcher) -> float:
        started = time.monotonic()
        await asyncio.wait_for(batcher.submit(["a"], BEAM2), 60)  # not held for a full batch
        return time.monotonic() - started

    assert run(timed, search, max_wait_ms=300.0) >= 0.3
    assert search.batches == [(["a"], BEAM2)]


def test_a_full_queue_refuses_at_once() -> None:
    search = BlockedSearch()

    async def flood(batcher: Batcher):  # type: ignore[no-untyped-def]
        first = asyncio.ensure_future(batcher.submit(["a"] * 6, BEAM2))
        assert await asyncio.to_thread(search.started.wait, 60)  # the first batch is in the worker: out of the queue
        queued = asyncio.ensure_future(batcher.submit(["b"] * 8, BEAM2))
        await until(lambda: batcher.stats.queued_sentences == 8)
        with pytest.raises(QueueFull, match="8 sentences are waiting; the queue takes 10"):
            await batcher.submit(["c"] * 3, BEAM2)
        search.release.set()
        return await first, await queued

    first, queued = run(flood, search, max_queue_sentences=10, max_batch_sentences=8, max_wait_ms=1.0)
    assert texts(first) == ["A"] * 6 and texts(queued) == ["B"] * 8


def test_an_abandoned_request_is_not_searched() -> None:
    search = BlockedSearch()

    async def abandon(batcher: Batcher):  # type: ignore[no-untyped-def]
        busy = asyncio.ensure_future(batcher.submit(["busy"], BEAM2))
        assert await asyncio.to_thread(search.started.wait, 60)
        with pytest.raises(TimeoutError):  # given up while the worker is still busy
            await asyncio.wait_for(batcher.submit(["gone"], BEAM3), 0.05)
        search.release.set()
        kept = await batcher.submit(["kept"], BEAM3)
        return await busy, kept, batcher.stats

    busy, kept, stats = run(abandon, search)
    assert texts(busy) == ["BUSY"] and texts(kept) == ["KEPT"]
    assert [lines for lines, _ in search.batches] == [["busy"], ["kept"]]
    assert stats.queued_sentences == 0


def test_a_failed_search_fails_its_requests_only() -> None:
    search = RecordingSearch(fail_on="bad")

    async def requests(batcher: Batcher):  # type: ignore[no-untyped-def]
        failed = await asyncio.gather(batcher.submit(["ok"], BEAM2), batcher.submit(["bad"], BEAM2),
                                      return_exceptions=True)  # fmt: skip
        return failed, await batcher.submit(["after"], BEAM2)

    failed, after = run(requests, search)
    assert all(isinstance(err, RuntimeError) and "cannot search 'bad'" in str(err) for err in failed)
    assert texts(after) == ["AFTER"]


def test_stop_answers_waiting_requests() -> None:
    search = RecordingSearch()

    async def stop_early(batcher: Batcher) -> None:
        waiting = asyncio.ensure_future(batcher.submit(["a"], BEAM2))
        await asyncio.sleep(0.01)  # queued, waiting for max_wait_ms
        await batcher.stop()
        with pytest.raises(RuntimeError, match="the server is shutting down"):
            await waiting

    run(stop_early, search, max_wait_ms=5000.0)
    assert search.batches == []


def test_a_request_given_up_leaves_the_queue_at_once() -> None:
    """A request that timed out while another was searched no longer counts against the queue: the next request
    is queued, not refused with 503, although the collector is still waiting for the search."""
    search = BlockedSearch()

    async def scenario(batcher: Batcher):  # type: ignore[no-untyped-def]
        busy = asyncio.ensure_future(batcher.submit(["busy"], BEAM2))
        assert await asyncio.to_thread(search.started.wait, 60)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(batcher.submit(["gone"] * 8, BEAM3), 0.01)
        waiting = batcher.stats.queued_sentences
        after = asyncio.ensure_future(batcher.submit(["next"] * 9, BEAM3))
        await asyncio.sleep(0)
        search.release.set()
        return waiting, await busy, await after

    waiting, busy, after = run(scenario, search, max_queue_sentences=10)
    assert waiting == 0
    assert texts(busy) == ["BUSY"] and texts(after) == ["NEXT"] * 9
    assert [lines for lines, _ in search.batches] == [["busy"], ["next"] * 9]


def test_a_search_past_its_deadline_stops_before_its_next_step(
    translator: Translator, test_lines: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real search, its request's deadline passed: no decoder step is taken (a 504 frees the worker for the
    requests behind it instead of searching on for nobody)."""
    steps: list[int] = []
    step = Stepper.step
    monkeypatch.setattr(Stepper, "step", lambda self, tokens: steps.append(1) or step(self, tokens))

    async def late(batcher: Batcher):  # type: ignore[no-untyped-def]
        with pytest.raises(SearchStopped):
            await batcher.submit(test_lines[:4], BEAM3, deadline=time.monotonic() - 1)
        steps_of_the_late = len(steps)
        return steps_of_the_late, await batcher.submit(test_lines[:1], BEAM3, deadline=time.monotonic() + 600)

    steps_of_the_late, after = run(late, translator.search)
    assert steps_of_the_late == 0
    assert len(steps) > 0 and texts(after) == translator.translate(test_lines[:1], BEAM3)  # the next one searched


def test_a_request_costlier_than_max_request_cost_is_413(make_client: ClientFactory, test_lines: list[str]) -> None:
    with make_client(max_request_cost=200) as client:
        assert client.post("/translate", json={"text": test_lines[:1], "beam": 2}).status_code == 200
        reply = client.post("/translate", json={"text": test_lines[:8], "beam": 5})
    assert reply.status_code == 413
    assert reply.json()["error"].startswith("request too costly: beam 5 × ")
    assert "exceeds the server's max_request_cost 200" in reply.json()["error"]
