"""A tensor that grows along one dimension: the key/value caches of incremental decoding."""

from __future__ import annotations

import torch
from torch import Tensor

from adlnmt.speedups import SPEEDUPS


class GrowingTensor:
    """A tensor [B, ..., T, ...] that grows by appending along ``dim`` (a key/value cache).

    With ``SPEEDUPS.preallocate`` and no autograd (in-place writes would break backward) it lives in a
    buffer with room for more positions (doubled when full): an append writes only the new positions
    and a beam reorder copies only the rows whose hypothesis changed. Otherwise every append is a
    ``torch.cat`` and every reorder a gather of all rows.
    """

    def __init__(self, value: Tensor, dim: int) -> None:
        self.dim = dim
        self.length = value.size(dim)
        self.buffer = value
        self.preallocated = SPEEDUPS.preallocate and not torch.is_grad_enabled()
        if self.preallocated:
            self.buffer = self._allocate(value, value.size(0), max(16, 2 * self.length))
            self.view.copy_(value)

    def _allocate(self, like: Tensor, rows: int, capacity: int) -> Tensor:
        shape = list(like.shape)
        shape[0], shape[self.dim] = rows, capacity
        return like.new_empty(shape)

    @property
    def view(self) -> Tensor:
        """The filled part, [B, ..., length, ...]."""
        return self.buffer.narrow(self.dim, 0, self.length)

    def append(self, value: Tensor) -> Tensor:
        """Add ``value``'s positions at the end; returns the whole tensor."""
        if not self.preallocated:
            self.buffer = torch.cat([self.buffer, value], dim=self.dim)
            self.length = self.buffer.size(self.dim)
            return self.buffer
        new_length = self.length + value.size(self.dim)
        if new_length > self.buffer.size(self.dim):
            grown = self._allocate(self.buffer, self.buffer.size(0), 2 * new_length)
            grown.narrow(self.dim, 0, self.length).copy_(self.view)
            self.buffer = grown
        self.buffer.narrow(self.dim, self.length, value.size(self.dim)).copy_(value)
        self.length = new_length
        return self.view

    def reorder(self, index: Tensor, moved: Tensor) -> None:
        """Row i becomes old row ``index[i]`` (same batch size); preallocated: in place, copying only the
        ``moved`` rows (those with index[i] ≠ i)."""
        if not self.preallocated:
            self.buffer = self.buffer.index_select(0, index)
            return
        if moved.numel():
            view = self.view
            view.index_copy_(0, moved, view.index_select(0, index[moved]))  # the select copies first: no aliasing

    def select(self, index: Tensor) -> None:
        """Rows ``index`` become the batch (any size)."""
        if not self.preallocated:
            self.buffer = self.buffer.index_select(0, index)
            return
        target = self._allocate(self.buffer, index.numel(), self.buffer.size(self.dim))
        torch.index_select(self.view, 0, index, out=target.narrow(self.dim, 0, self.length))
        self.buffer = target
