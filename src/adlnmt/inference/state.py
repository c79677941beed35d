"""The decoder state as a fixed list of named tensors: what the exported graphs take and return.

A :class:`~adlnmt.layers.base.DecoderState` is keyed by (layer, name); an exported graph has positional
inputs. :class:`StateLayout` discovers every entry of a model's state by probing it (init_state and a few
decoder steps on a dummy batch), names it ``<module path>.<entry>`` (``decoder.layers.0.inner.1.k``), records
its kind (dynamic: replaced every step; static: depends on the source only; growing: one position longer
every step) and which axes are dynamic (``batch`` is axis 0 of every entry; ``source`` where the size follows
the source length; ``time`` is the growing axis), in the order of the model's modules.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from adlnmt.layers.base import DecoderState, SourceMemory
from adlnmt.layers.growing_tensor import GrowingTensor
from adlnmt.model import Seq2Seq

KINDS = ("static", "dynamic", "growing")
PROBE_STEPS = 3


@dataclass(frozen=True)
class StateEntry:
    """One tensor of the decoder state, as listed in the export manifest."""

    name: str  # unique: module path + "." + entry name
    module: str  # the owning module's path in the model ("" is the model itself)
    key: str  # the entry's name inside the DecoderState
    kind: str  # static | dynamic | growing
    axes: dict[int, str]  # dynamic axes: {0: "batch", …, axis: "source" | "time"}
    shape: list[int]  # the probe's shape (dynamic axes hold the probe's sizes)
    dtype: str  # torch dtype name, e.g. "float32"

    def to_dict(self) -> dict:
        record = asdict(self)
        record["axes"] = {str(axis): name for axis, name in self.axes.items()}
        return record

    @classmethod
    def from_dict(cls, record: dict) -> StateEntry:
        return cls(**{**record, "axes": {int(axis): name for axis, name in record["axes"].items()}})

    @property
    def time_axis(self) -> int | None:
        return next((axis for axis, name in self.axes.items() if name == "time"), None)

    def empty(self, batch: int) -> Tensor:
        """A growing entry before the first step: [batch, …, 0, …]."""
        shape = list(self.shape)
        shape[0] = batch
        axis = self.time_axis
        assert axis is not None, f"{self.name} is not a growing entry"
        shape[axis] = 0
        return torch.zeros(shape, dtype=getattr(torch, self.dtype))


class PlainGrowing(GrowingTensor):
    """A growing entry without a preallocated buffer (appends concatenate): what a traced graph can express,
    and the form in which an engine keeps caches that its graph returns whole."""

    def __init__(self, value: Tensor, dim: int) -> None:
        self.dim = dim
        self.length = value.size(dim)
        self.buffer = value
        self.preallocated = False


def probe_source(model: Seq2Seq, batch: int, length: int) -> Tensor:
    """A dummy source batch [batch, length] whose last row is two tokens shorter (so padding occurs)."""
    src = torch.full((batch, length), 4 % model.config.src_vocab_size, dtype=torch.long)
    src[-1, max(1, length - 2) :] = model.config.pad_id
    return src


def probe_memory(model: Seq2Seq, batch: int, length: int) -> SourceMemory:
    """The encoding of :func:`probe_source`."""
    return model.encode(probe_source(model, batch, length))


def probe_state(model: Seq2Seq, memory: SourceMemory, steps: int) -> DecoderState:
    """The decoder state after ``steps`` decoder steps on ``memory``."""
    state = model.init_state(memory)
    tokens = torch.full((memory.mask.size(0),), 4 % model.config.tgt_vocab_size, dtype=torch.long)
    for _ in range(steps):
        model.decode_step(tokens, memory, state)
    return state


def _entries_by_key(state: DecoderState) -> dict[tuple[Hashable, str], tuple[str, Tensor, int | None]]:
    """Every entry of ``state``: key → (kind, tensor, growing axis)."""
    found: dict[tuple[Hashable, str], tuple[str, Tensor, int | None]] = {}
    found.update({key: ("static", value, None) for key, value in state.static.items()})
    found.update({key: ("dynamic", value, None) for key, value in state.dynamic.items()})
    found.update({key: ("growing", entry.view, entry.dim) for key, entry in state.growing.items()})
    return found


def _axes(short: Tensor, long: Tensor, grow_axis: int | None) -> dict[int, str]:
    """Dynamic axes of an entry seen after the same steps with a short and a long source."""
    axes = {0: "batch"}
    for axis in range(1, short.dim()):
        if axis == grow_axis:
            axes[axis] = "time"
        elif short.size(axis) != long.size(axis):
            axes[axis] = "source"
    return axes


class StateLayout:
    """The entries of a model's decoder state in a fixed order, and conversion to and from tensor lists."""

    def __init__(self, entries: Sequence[StateEntry]) -> None:
        self.entries = list(entries)

    @classmethod
    @torch.no_grad()
    def discover(cls, model: Seq2Seq) -> StateLayout:
        """Probe ``model`` (in eval mode) with a short and a long source to find every entry and its axes."""
        short = _entries_by_key(probe_state(model, probe_memory(model, 2, 3), PROBE_STEPS))
        long = _entries_by_key(probe_state(model, probe_memory(model, 2, 6), PROBE_STEPS))
        entries = []
        for path, module in model.named_modules():
            for (owner, key), (kind, value, grow_axis) in short.items():
                if owner != id(module):
                    continue
                name = f"{path}.{key}" if path else key
                axes = _axes(value, long[(owner, key)][1], grow_axis)
                dtype = str(value.dtype).removeprefix("torch.")
                entries.append(StateEntry(name, path, key, kind, axes, list(value.shape), dtype))
        return cls(entries)

    def of_kind(self, *kinds: str) -> list[StateEntry]:
        return [entry for entry in self.entries if entry.kind in kinds]

    def to_dict(self) -> list[dict]:
        return [entry.to_dict() for entry in self.entries]

    @classmethod
    def from_dict(cls, records: list[dict]) -> StateLayout:
        return cls([StateEntry.from_dict(record) for record in records])

    def tensors(self, state: DecoderState, entries: Sequence[StateEntry], owners: dict[str, Hashable]) -> list[Tensor]:
        """The tensors of ``entries`` in ``state``, in order (``owners``: module path → the state's owner key)."""
        stores = {"static": state.static, "dynamic": state.dynamic}
        values = []
        for entry in entries:
            key = (owners[entry.module], entry.key)
            values.append(state.growing[key].view if entry.kind == "growing" else stores[entry.kind][key])
        return values

    def fill(self, state: DecoderState, entries: Sequence[StateEntry], values: Sequence[Tensor],
             owners: dict[str, Hashable]) -> None:  # fmt: skip
        """Put ``values`` (in the order of ``entries``) into ``state``; growing entries are replaced whole."""
        for entry, value in zip(entries, values, strict=True):
            key = (owners[entry.module], entry.key)
            if entry.kind == "growing":
                time_axis = entry.time_axis
                assert time_axis is not None
                state.growing[key] = PlainGrowing(value, time_axis)
            else:
                (state.static if entry.kind == "static" else state.dynamic)[key] = value


def module_owners(model: Seq2Seq) -> dict[str, Hashable]:
    """Module path → the owner key its state entries have in a DecoderState of ``model``."""
    return {path: id(module) for path, module in model.named_modules()}


def path_owners(layout: StateLayout) -> dict[str, Hashable]:
    """Module path → an owner key for a DecoderState kept outside PyTorch modules (by an engine)."""
    return {entry.module: entry.module for entry in layout.entries}
