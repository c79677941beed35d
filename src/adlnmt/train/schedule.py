"""Learning-rate schedules: reduce-on-plateau (the ADL paper's setup) and inverse square root with
linear warm-up (Vaswani et al.; the AAN paper: warm-up 4000, β = (0.9, 0.98), ε = 1e-9)."""

from __future__ import annotations

import math
from typing import Any

from torch.optim import Optimizer

from adlnmt.train.config import TrainConfig


class Schedule:
    """plateau: lr ← lr · decay at the ``lr_patience``-th consecutive checkpoint without improvement (torch's
    ReduceLROnPlateau decays one later), never at an improving one: 0 and 1 both decay at every checkpoint without
    improvement; inverse-sqrt: lr(u) = lr · min(u / warmup, √(warmup / u)) at update u."""

    def __init__(self, config: TrainConfig) -> None:
        self.kind = config.lr_schedule
        self.base_lr = config.lr
        self.warmup = max(1, config.warmup)
        self.decay = config.lr_decay
        self.patience = config.lr_patience
        self.lr = config.lr if self.kind == "plateau" else self.rate(1)
        self.stalled = 0  # checkpoints without improvement since the last decay

    def rate(self, update: int) -> float:
        return self.base_lr * min(update / self.warmup, math.sqrt(self.warmup / max(update, 1)))

    def apply(self, optimizer: Optimizer) -> None:
        for group in optimizer.param_groups:
            group["lr"] = self.lr

    def step_update(self, optimizer: Optimizer, update: int) -> None:
        """Before the optimizer step of update ``update`` (1-based)."""
        if self.kind == "inverse-sqrt":
            self.lr = self.rate(update)
        self.apply(optimizer)

    def step_checkpoint(self, optimizer: Optimizer, improved: bool) -> None:
        if self.kind != "plateau":
            return
        if improved:
            self.stalled = 0
            return
        self.stalled += 1
        if self.stalled >= max(self.patience, 1):
            self.lr *= self.decay
            self.stalled = 0
            self.apply(optimizer)

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "stalled": self.stalled}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr, self.stalled = float(state["lr"]), int(state["stalled"])
