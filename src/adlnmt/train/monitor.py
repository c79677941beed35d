"""What a training run shows while it runs: a progress line every ``--log-interval`` updates (on stderr, terminal
or not) and TensorBoard scalars (``--tensorboard``), both on the main rank only."""

from __future__ import annotations

import importlib.util
import math
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adlnmt.errors import UserError
from adlnmt.store.atomic import describe
from adlnmt.store.names import TENSORBOARD_DIR

TENSORBOARD_HINT = "the tensorboard package is not installed: pip install 'adlnmt[tensorboard]'"


def tensorboard_installed() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def tensorboard_dir(setting: str, model_dir: Path) -> Path | None:
    """Where ``--tensorboard`` writes: ``auto`` is ``MODEL/tensorboard`` when the package is installed (else
    nothing), ``off`` nothing, anything else that folder (an error without the package)."""
    if setting == "off" or (setting == "auto" and not tensorboard_installed()):
        return None
    if not tensorboard_installed():
        raise UserError(f"--tensorboard {setting}: {TENSORBOARD_HINT}")
    return model_dir / TENSORBOARD_DIR if setting == "auto" else Path(setting)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


@dataclass
class Interval:
    """The updates since the last progress line: their loss (per token), tokens, gradient norms and wall time
    (validation and checkpoints included, so that the ETA is what the clock will show)."""

    started: float = field(default_factory=time.monotonic)
    loss: float = 0.0  # summed loss/token × tokens
    tokens: int = 0
    grad_norms: list[float] = field(default_factory=list)
    updates: int = 0

    def add(self, loss: float, tokens: int, grad_norm: float) -> None:
        self.updates += 1
        if not math.isnan(loss):
            self.loss += loss * tokens
            self.tokens += tokens
        if not math.isnan(grad_norm):
            self.grad_norms.append(grad_norm)

    def summary(self, now: float | None = None) -> dict[str, float]:
        """Mean loss per token, tokens/s, seconds per update and mean gradient norm (NaN when none) of the interval."""
        seconds = max((time.monotonic() if now is None else now) - self.started, 1e-9)
        return {
            "loss": self.loss / self.tokens if self.tokens else math.nan,
            "tokens_per_s": self.tokens / seconds,
            "seconds_per_update": seconds / max(self.updates, 1),
            "grad_norm": sum(self.grad_norms) / len(self.grad_norms) if self.grad_norms else math.nan,
        }


def progress_line(update: int, max_updates: int, epoch: int, lr: float, summary: dict[str, float]) -> str:
    """``update 200/600 (33 %) epoch 2: loss 4.213 lr 1.00e-03 |g| 0.84 2,345 tok/s ETA 1m03s``; without a
    ``max_updates`` there is no ETA."""
    where = f"update {update}/{max_updates} ({100 * update // max_updates} %)" if max_updates else f"update {update}"
    norm = f" |g| {summary['grad_norm']:.2f}" if not math.isnan(summary["grad_norm"]) else ""
    line = f"{where} epoch {epoch}: loss {summary['loss']:.3f} lr {lr:.2e}{norm} {summary['tokens_per_s']:,.0f} tok/s"
    if max_updates:
        line += f" ETA {_duration(max(max_updates - update, 0) * summary['seconds_per_update'])}"
    return line


class Board:
    """TensorBoard scalars of one run (``torch.utils.tensorboard``'s SummaryWriter): ``train/*`` at every progress
    line, ``valid/*`` at every checkpoint. ``resume_at``: events of updates after it, written by an earlier session
    that did not reach its next checkpoint, are purged so that the curves carry no duplicates.

    The scalars are a view, not the run: when they cannot be written (a full disk), one warning names the folder and
    the run goes on without them; the writer's background thread fails quietly (its error is the warning)."""

    def __init__(self, folder: Path, resume_at: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.folder = folder
        self.writer: Any = None
        self._previous_hook = threading.excepthook
        threading.excepthook = self._thread_failed
        purge_step = resume_at + 1 if resume_at else None

        def start() -> None:
            self.writer = SummaryWriter(str(folder), purge_step=purge_step)

        self._guarded(start)

    def _thread_failed(self, args: threading.ExceptHookArgs) -> None:
        """threading.excepthook: the event writer's thread dies quietly (its error reaches :meth:`_guarded`)."""
        if type(args.thread).__name__ != "_AsyncWriterThread":
            self._previous_hook(args)

    def _guarded(self, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as err:  # OSError, or the writer thread's error raised again here
            reason = err.strerror if isinstance(err, OSError) and err.strerror else describe(err)
            print(f"warning: {self.folder}: cannot write TensorBoard events ({reason}); training goes on without "
                  "them", file=sys.stderr, flush=True)  # fmt: skip
            writer, self.writer = self.writer, None
            if writer is not None:
                with suppress(Exception):
                    writer.close()

    def train(self, update: int, lr: float, summary: dict[str, float]) -> None:
        values = {"train/loss": summary["loss"], "train/lr": lr, "train/tokens_per_s": summary["tokens_per_s"]}
        if not math.isnan(summary["grad_norm"]):
            values["train/grad_norm"] = summary["grad_norm"]
        for tag, value in values.items():
            if self.writer is not None:
                self._guarded(lambda tag=tag, value=value: self.writer.add_scalar(tag, value, update))

    def validation(self, update: int, record: dict[str, Any]) -> None:
        for key, tag in (("valid_ppl", "valid/perplexity"), ("valid_bleu", "valid/bleu")):
            if key in record and self.writer is not None:
                self._guarded(lambda key=key, tag=tag: self.writer.add_scalar(tag, record[key], update))
        if self.writer is not None:
            self._guarded(self.writer.flush)  # a checkpoint's figures are on disk when it is

    def close(self) -> None:
        if self.writer is not None:
            self._guarded(self.writer.close)
            self.writer = None
        threading.excepthook = self._previous_hook
