"""Batching across requests: concurrent requests with the same search options share one search.

Requests enter an asyncio queue. A collector task on the event loop takes the oldest waiting request, then every
waiting request with the same :class:`~adlnmt.inference.search.SearchOptions` (beam, n-best, alignments) until the batch
holds ``max_batch_sentences`` sentences or the oldest request has waited ``max_wait_ms``; one worker thread runs
the search on the merged sentences (the search sorts them by length into batches), and each request's future gets
its own slice of the results, in its input order. While the worker searches, new requests queue up and form the
next batch, so batches grow with the load and a lone request waits at most ``max_wait_ms``.

A request given up by its caller (its deadline passed) leaves the queue at once, so that it no longer counts against
``max_queue_sentences``; a search whose requests have all passed their deadlines (or been given up) stops before its
next step (:func:`adlnmt.inference.search.stop_when`), so that the requests behind it are not kept waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from adlnmt.inference.constraints import EncodedConstraints
from adlnmt.inference.options import SearchOptions, stop_when
from adlnmt.inference.translator import Translation

SearchFunction = Callable[..., list[list[Translation]]]  # (lines, options[, prefixes=...]) → results
Line = list[int] | None  # an encoded line (Translator.search_encoded); None: an empty one


class QueueFull(Exception):
    """The queue holds too many sentences for another request (the server answers 503)."""


@dataclass
class Job:
    """One request's sentences waiting for the search."""

    lines: list[Line]
    options: SearchOptions
    future: asyncio.Future[list[list[Translation]]]
    deadline: float = math.inf  # time.monotonic() after which its caller no longer waits
    queued_at: float = field(default_factory=time.monotonic)
    queued: bool = True  # its sentences count in BatchStats.queued_sentences
    prefixes: list[str] | None = None  # target prefixes, one per line
    constraints: list[EncodedConstraints | None] | None = None  # lexical constraints, one per line


@dataclass
class BatchStats:
    """Counters shown by ``GET /health``: batches searched, their sentences and requests, sentences waiting and
    sentences being searched now."""

    batches: int = 0
    sentences: int = 0
    requests: int = 0
    queued_sentences: int = 0
    searching_sentences: int = 0
    largest_batch: int = 0


class Batcher:
    """Merge concurrent requests into shared searches run by one worker thread (see the module's docstring).

    ``search`` is called with the merged lines and the shared options; ``batch_size`` of those options is
    ``max_batch_sentences``. Use ``await start()`` on the serving event loop, ``await submit(...)`` per request and
    ``await stop()`` at shutdown."""

    def __init__(
        self, search: SearchFunction, max_batch_sentences: int, max_wait_ms: float, max_queue_sentences: int
    ) -> None:
        self.search = search
        self.max_batch_sentences = max_batch_sentences
        self.max_wait = max_wait_ms / 1000
        self.max_queue_sentences = max_queue_sentences
        self.stats = BatchStats()
        self._waiting: list[Job] = []
        self._arrived: asyncio.Queue[Job] | None = None
        self._collector: asyncio.Task[None] | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="adlnmt-search")

    async def start(self) -> None:
        self._arrived = asyncio.Queue()
        self._collector = asyncio.get_running_loop().create_task(self._collect(), name="adlnmt-batcher")

    async def stop(self) -> None:
        """Cancel the collector, fail requests still waiting, and let the worker finish its batch."""
        if self._collector is not None:
            self._collector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._collector
        for job in self._drain_arrived() + self._waiting:
            if not job.future.done():
                job.future.set_exception(RuntimeError("the server is shutting down"))
        self._waiting = []
        self._worker.shutdown(wait=True)

    async def submit(
        self, lines: list[Line], options: SearchOptions, deadline: float = math.inf, prefixes: list[str] | None = None,
        constraints: list[EncodedConstraints | None] | None = None,
    ) -> list[list[Translation]]:  # fmt: skip
        """The search results for ``lines`` (in their order) once a batch containing them has been searched.

        Raises :class:`QueueFull` at once when the waiting sentences would exceed ``max_queue_sentences``.
        Cancelling the call (e.g. a timeout) takes the request's sentences out of the queue at once if they were not
        yet searched; ``deadline`` (``time.monotonic()``): when the search may stop if no other request of its batch
        still waits (:class:`~adlnmt.inference.search.SearchStopped`)."""
        if self._arrived is None:
            raise RuntimeError("the batcher is not started")
        if not lines:
            return []
        if self.stats.queued_sentences + len(lines) > self.max_queue_sentences:
            raise QueueFull(f"{self.stats.queued_sentences} sentences are waiting; the queue takes "
                            f"{self.max_queue_sentences}")  # fmt: skip
        future = asyncio.get_running_loop().create_future()
        job = Job(lines, options, future, deadline, prefixes=prefixes, constraints=constraints)
        self.stats.queued_sentences += len(lines)
        self._arrived.put_nowait(job)
        try:
            return await job.future
        except asyncio.CancelledError:
            self._unqueue(job)
            raise

    def _unqueue(self, job: Job) -> None:
        """Stop counting ``job``'s sentences as waiting (once)."""
        if job.queued:
            job.queued = False
            self.stats.queued_sentences -= len(job.lines)

    def _drain_arrived(self) -> list[Job]:
        jobs = []
        while self._arrived is not None and not self._arrived.empty():
            jobs.append(self._arrived.get_nowait())
        return jobs

    async def _collect(self) -> None:
        """Form batches and search them, one at a time, forever (until cancelled)."""
        assert self._arrived is not None
        while True:
            if not self._waiting:
                self._waiting.append(await self._arrived.get())
            self._waiting += self._drain_arrived()
            batch = await self._fill_batch()
            if batch:
                await self._run(batch)

    async def _fill_batch(self) -> list[Job]:
        """The oldest live job and the waiting jobs with its options, waiting for more until the batch is full or
        the oldest job's ``max_wait_ms`` has passed. Jobs whose caller gave up are dropped."""
        assert self._arrived is not None
        self._drop_abandoned()
        if not self._waiting:
            return []
        first = self._waiting[0]
        deadline = first.queued_at + self.max_wait
        while True:
            batch = self._matching(first.options)
            size = sum(len(job.lines) for job in batch)
            remaining = deadline - time.monotonic()
            if size >= self.max_batch_sentences or remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                self._waiting.append(await asyncio.wait_for(self._arrived.get(), remaining))
            self._waiting += self._drain_arrived()
            self._drop_abandoned()
            if first.future.done():  # the oldest caller gave up meanwhile: start over with the next one
                return []
        for job in batch:
            self._waiting.remove(job)
        return batch

    def _matching(self, options: SearchOptions) -> list[Job]:
        """Waiting jobs with ``options``, oldest first, while they fit in one batch (the first always does)."""
        batch: list[Job] = []
        size = 0
        for job in self._waiting:
            if job.options != options:
                continue
            if batch and size + len(job.lines) > self.max_batch_sentences:
                break
            batch.append(job)
            size += len(job.lines)
        return batch

    def _drop_abandoned(self) -> None:
        for job in [job for job in self._waiting if job.future.done()]:
            self._waiting.remove(job)
            self._unqueue(job)

    async def _run(self, batch: list[Job]) -> None:
        """Search the batch in the worker thread and route each job's slice of the results to its future."""
        lines = [line for job in batch for line in job.lines]
        for job in batch:
            self._unqueue(job)
        options = batch[0].options
        prefixes = [p for job in batch for p in job.prefixes or [""] * len(job.lines)]
        constraints = [c for job in batch for c in job.constraints or [None] * len(job.lines)]
        self.stats.searching_sentences = len(lines)
        try:
            found = await asyncio.get_running_loop().run_in_executor(self._worker, self._search, lines, options, batch,
                                                                     prefixes, constraints)  # fmt: skip
        except asyncio.CancelledError:  # stop() during a search: its callers get an answer, never silence
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(RuntimeError("the server is shutting down"))
            raise
        except Exception as err:  # a failed search fails its requests, never the server
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(err)
            return
        finally:
            self.stats.searching_sentences = 0
        self.stats.batches += 1
        self.stats.sentences += len(lines)
        self.stats.requests += len(batch)
        self.stats.largest_batch = max(self.stats.largest_batch, len(lines))
        start = 0
        for job in batch:
            if not job.future.done():
                job.future.set_result(found[start : start + len(job.lines)])
            start += len(job.lines)

    def _search(self, lines: list[Line], options: SearchOptions, batch: list[Job], prefixes: list[str],
                constraints: list[EncodedConstraints | None]) -> list[list[Translation]]:  # fmt: skip
        """The search (in the worker thread), stopped between steps once no request of ``batch`` waits for it."""
        latest = max(job.deadline for job in batch)

        def nobody_waits() -> bool:  # Future.done() only reads its state: safe from this thread
            return time.monotonic() > latest or all(job.future.done() for job in batch)

        search = partial(self.search, prefixes=prefixes) if any(prefixes) else self.search
        search = partial(search, constraints=constraints) if any(constraints) else search
        with stop_when(nobody_waits):
            return search(lines, options)
