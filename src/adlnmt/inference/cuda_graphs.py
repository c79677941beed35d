"""The decoder step at fixed shapes, replayed from CUDA graphs (the ``cuda_graphs`` search option).

Eager decoding on a GPU is bound by the host: many small kernel launches a step (``benchmarks/NOTES.md``). A
:class:`GraphStepper` keeps a batch's decoder state in the persistent buffers of a :class:`Bucket`, whose shapes
are fixed: the rows padded to the bucket's row count (padding rows repeat the last real row, so they stay
finite), the source padded to the bucket's length (masked positions), the key/value caches allocated for the
longest output. So step t of every batch in a bucket has the same shapes and the same addresses: on CUDA it is
captured once per (bucket, t) into a CUDA graph and replayed after; elsewhere the same padded path runs eagerly
(what the CPU tests compare with the plain :class:`~adlnmt.inference.stepper.Stepper`). Beam reorders and dropped
sentences gather rows in place; step 0 runs eagerly (it creates the caches). Dynamic state (RNN states,
running sums, convolution windows) is copied back into its buffers inside the graph.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import Tensor

from adlnmt.data.vocab import BOS, PAD
from adlnmt.inference.stepper import StepEngine, Stepper
from adlnmt.layers.base import SourceMemory
from adlnmt.layers.basic import Pos
from adlnmt.model import Seq2Seq, iter_layers

ROW_MULTIPLE = 8  # a new bucket's rows, source length and cache capacity are rounded up to these
SOURCE_MULTIPLE = 32
STEP_MULTIPLE = 64

Key = tuple[int, str]


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclass(eq=False)  # buckets are compared by identity
class Bucket:
    """Persistent buffers of one fixed shape (rows × source length, caches of ``steps`` positions) and the
    graphs captured on them, one per step."""

    rows: int
    source_length: int
    steps: int
    memory: SourceMemory  # [rows, source_length, ...]
    tokens: Tensor  # [rows] the step's input tokens
    log_probs: Tensor | None = None  # [rows, V] the step's output
    tensors: dict[Key, Tensor] = field(default_factory=dict)  # static and dynamic state entries
    caches: dict[Key, Tensor] = field(default_factory=dict)  # growing entries, ``steps`` positions
    graphs: dict[int, torch.cuda.CUDAGraph] = field(default_factory=dict)
    pool: object = None  # the graphs' shared memory pool
    stream: torch.cuda.Stream | None = None  # where they are captured
    capture: bool = False  # False: the padded path runs eagerly (no CUDA, or a capture failed)
    weights: tuple[int, ...] = ()  # the addresses of the model's parameters that the graphs read
    kept: list[Tensor] = field(default_factory=list)  # tensors the graphs read that the model may replace
    warmed: bool = False

    def fits(self, rows: int, source_length: int, steps: int, like: Tensor, weights: tuple[int, ...]) -> bool:
        """Whether a batch of ``rows`` fits without padding it to more than twice its rows, on the same weights."""
        final = self.memory.final
        return (
            weights == self.weights
            and rows <= self.rows < 2 * round_up(rows, ROW_MULTIPLE)
            and source_length <= self.source_length
            and steps <= self.steps
            and final.dtype == like.dtype
            and final.device == like.device
        )

    def dominated_by(self, other: Bucket) -> bool:
        return self.rows <= other.rows and self.source_length <= other.source_length and self.steps <= other.steps


BUCKETS: weakref.WeakKeyDictionary[Seq2Seq, list[Bucket]] = weakref.WeakKeyDictionary()  # each live model's


def padded_rows(index: Tensor, rows: int) -> Tensor:
    """Row indices [rows]: ``index`` [N], then its last entry repeated (padding rows copy a real row)."""
    return torch.cat([index, index[-1:].expand(rows - index.numel())])


def copy_padded(target: Tensor, value: Tensor) -> None:
    """``value`` [N, S, ...] into ``target`` [R, S', ...] (R ≥ N, S' ≥ S): rows past N repeat the last row,
    positions past S are zero (False)."""
    rows = padded_rows(torch.arange(value.size(0), device=value.device), target.size(0))
    if value.dim() > 1 and value.size(1) < target.size(1):
        target.narrow(1, value.size(1), target.size(1) - value.size(1)).zero_()
        target = target.narrow(1, 0, value.size(1))
    target.copy_(value.index_select(0, rows))


def gather_rows(buffer: Tensor, index: Tensor) -> None:
    """In place: rows 0 … N−1 of ``buffer`` become its rows ``index`` [N]."""
    buffer.narrow(0, 0, index.numel()).copy_(buffer.index_select(0, index))


def weight_addresses(model: Seq2Seq) -> tuple[int, ...]:
    return tuple(p.data_ptr() for p in model.parameters())


def new_bucket(model: Seq2Seq, memory: SourceMemory, steps: int, capture: bool) -> Bucket:
    rows = round_up(memory.mask.size(0), ROW_MULTIPLE)
    length = round_up(memory.mask.size(1), SOURCE_MULTIPLE)

    def buffer(like: Tensor) -> Tensor:
        return like.new_zeros(rows, length, *like.shape[2:])

    padded = SourceMemory(buffer(memory.final), buffer(memory.mask), [buffer(b) for b in memory.blocks])
    bucket = Bucket(rows, length, round_up(steps, STEP_MULTIPLE), padded, memory.mask.new_zeros(rows, dtype=torch.long))
    bucket.capture, bucket.weights = capture, weight_addresses(model)
    if capture:
        bucket.pool, bucket.stream = torch.cuda.graph_pool_handle(), torch.cuda.Stream(memory.final.device)
    for layer in iter_layers(model.decoder):
        if type(layer) is Pos:  # its sinusoid table grows on demand: never inside a capture
            layer.embedding(0, bucket.steps + 1, memory.final.device)
            bucket.kept.append(layer.cache)  # a later, longer bucket replaces it: this one's graphs read it
    return bucket


def bucket_for(model: Seq2Seq, memory: SourceMemory, steps: int, capture: bool) -> Bucket:
    """The smallest bucket of ``model`` that holds ``memory`` and ``steps`` decoding steps (a new one if none)."""
    rows, length = memory.mask.shape
    weights = weight_addresses(model)
    buckets = BUCKETS.setdefault(model, [])
    buckets[:] = [b for b in buckets if b.weights == weights]  # moved or converted weights: old graphs are stale
    fitting = [b for b in buckets if b.fits(rows, length, steps, memory.final, weights)]
    if fitting:
        return min(fitting, key=lambda b: (b.rows, b.source_length, b.steps))
    bucket = new_bucket(model, memory, steps, capture)
    buckets[:] = [b for b in buckets if not b.dominated_by(bucket)] + [bucket]
    return bucket


class GraphStepper(Stepper):
    """A :class:`~adlnmt.inference.stepper.Stepper` whose decoder steps run at the fixed shapes of a :class:`Bucket`
    (captured in CUDA graphs on CUDA). ``steps``: the most decoding steps the batch can take."""

    def __init__(self, model: Seq2Seq, memory: SourceMemory, steps: int) -> None:
        capture = memory.final.is_cuda
        self.bucket = bucket_for(model, memory, steps + 1, capture)
        self.rows = memory.mask.size(0)  # the real rows (the first ones of the bucket's)
        for target, value in zip(self.bucket_tensors(self.bucket.memory), self.bucket_tensors(memory), strict=True):
            copy_padded(target, value)
        super().__init__(model, self.bucket.memory)
        self.adopt(self.bucket.tensors, {**self.state.static, **self.state.dynamic})
        self.point_state()

    @staticmethod
    def bucket_tensors(memory: SourceMemory) -> list[Tensor]:
        return [memory.final, memory.mask, *memory.blocks]

    def adopt(self, buffers: dict[Key, Tensor], values: dict[Key, Tensor]) -> None:
        """Copy ``values`` into the bucket's ``buffers`` of the same keys (created at the first batch)."""
        for key, value in values.items():
            if key not in buffers:
                buffers[key] = torch.empty_like(value)
            buffers[key].copy_(value)

    def point_state(self) -> None:
        """Make the state's static and dynamic entries the bucket's buffers."""
        state, tensors = self.state, self.bucket.tensors
        assert state is not None
        state.static = {key: tensors[key] for key in state.static}
        state.dynamic = {key: tensors[key] for key in state.dynamic}

    def adopt_caches(self) -> None:
        """After step 0: move every growing entry into the bucket's cache of ``steps`` positions."""
        assert self.state is not None
        for key, entry in self.state.growing.items():
            shape = list(entry.buffer.shape)
            shape[entry.dim] = self.bucket.steps
            cache = self.bucket.caches.get(key)
            if cache is None or list(cache.shape) != shape:
                cache = self.bucket.caches[key] = entry.buffer.new_zeros(shape)
            cache.narrow(entry.dim, 0, entry.length).copy_(entry.view)
            entry.buffer, entry.preallocated = cache, True

    def compute(self) -> None:
        """One decoder step on the bucket's buffers: tokens → log-probabilities, dynamic state written back."""
        state, bucket = self.state, self.bucket
        assert state is not None and isinstance(self.model, Seq2Seq)
        logits = self.model.decode_step(bucket.tokens, bucket.memory, state)
        self.adopt(bucket.tensors, state.dynamic)
        self.point_state()
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        log_probs[:, PAD] = float("-inf")
        log_probs[:, BOS] = float("-inf")
        if bucket.log_probs is None or bucket.log_probs.shape != log_probs.shape:
            bucket.log_probs = torch.empty_like(log_probs)
        bucket.log_probs.copy_(log_probs)

    def step(self, tokens: Tensor) -> tuple[Tensor, Tensor | None]:
        state, bucket = self.state, self.bucket
        assert state is not None
        t = state.step
        if t >= bucket.steps:
            raise RuntimeError(f"CUDA graphs: step {t} is past the bucket's {bucket.steps} cached positions")
        bucket.tokens.narrow(0, 0, tokens.numel()).copy_(tokens)
        if t == 0:
            self.first_step()
        elif not bucket.capture:
            self.compute()
        elif t in bucket.graphs:
            bucket.graphs[t].replay()
            state.step = t + 1
            for entry in state.growing.values():
                entry.length = t + 1
        else:
            self.capture_step(t)
        assert bucket.log_probs is not None
        return bucket.log_probs.narrow(0, 0, self.rows).clone(), None

    def first_step(self) -> None:
        """Step 0, eagerly (on the capture stream once per bucket: the warm-up CUDA graphs ask for)."""
        if not self.bucket.capture or self.bucket.warmed:
            self.compute()
        else:
            with self.on_capture_stream():
                self.compute()
            self.bucket.warmed = True
        self.adopt_caches()

    @contextmanager
    def on_capture_stream(self) -> Iterator[None]:
        """Run on the bucket's side stream, ordered after and before the current stream's work."""
        stream, current = self.bucket.stream, torch.cuda.current_stream()
        assert stream is not None
        stream.wait_stream(current)
        with torch.cuda.stream(stream):
            yield
        current.wait_stream(stream)

    def capture_step(self, t: int) -> None:
        """Capture step ``t`` (the capture records, it does not run), then replay it; eager if capture fails.
        (``CUDAGraph.capture_begin`` rather than ``torch.cuda.graph``, which synchronises and empties the
        allocator's cache before each of the many captures.)"""
        state, bucket = self.state, self.bucket
        assert state is not None
        graph = torch.cuda.CUDAGraph()
        try:
            with self.on_capture_stream():
                graph.capture_begin(pool=bucket.pool)
                try:
                    self.compute()
                finally:
                    graph.capture_end()
        except RuntimeError as error:
            bucket.capture = False
            warnings.warn(f"CUDA graphs: capturing the decoder step failed ({error}); decoding eagerly", stacklevel=2)
            state.step = t
            for entry in state.growing.values():
                entry.length = t
            self.point_state()
            self.compute()
            return
        bucket.graphs[t] = graph
        graph.replay()

    def reorder(self, index: Tensor) -> None:
        """Row i continues the hypothesis of row ``index[i]``, in place."""
        state = self.state
        assert state is not None
        for key in state.dynamic:
            gather_rows(self.bucket.tensors[key], index)
        moved = index.ne(torch.arange(index.numel(), device=index.device)).nonzero().squeeze(1)
        for entry in state.growing.values():
            entry.reorder(index, moved)

    def select(self, index: Tensor) -> None:
        """Keep rows ``index`` (fewer than the bucket's), in place."""
        state = self.state
        assert state is not None
        if index.numel() > self.bucket.rows:
            raise RuntimeError(f"CUDA graphs: {index.numel()} rows do not fit the bucket's {self.bucket.rows}")
        for buffer in [*self.bucket_tensors(self.bucket.memory), *self.bucket.tensors.values()]:
            gather_rows(buffer, index)
        for entry in state.growing.values():
            gather_rows(entry.view, index)
        self.rows = index.numel()


def graph_stepper(
    model: Seq2Seq | StepEngine, memory: SourceMemory, steps: int, incremental: bool, alignments: bool
) -> Stepper:
    """A :class:`GraphStepper` where CUDA graphs apply, else (with a note) the plain stepper. Only the torch engine
    has CUDA graphs (the search checks the engine's capabilities first)."""
    assert isinstance(model, Seq2Seq), "CUDA graphs need the torch engine"
    reason = (
        "they need incremental decoding"
        if not incremental
        else "alignments read every step's attention maps"
        if alignments
        else None
    )
    if reason is None:
        return GraphStepper(model, memory, steps)
    warnings.warn(f"CUDA graphs off: {reason}; decoding eagerly", stacklevel=2)
    return Stepper(model, memory, incremental, alignments)
