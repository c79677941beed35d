"""The training loop: token batches, label-smoothed cross-entropy, checkpoints with validation,
early stopping, exact resume after any kill, a graceful stop on SIGTERM/SIGINT, DistributedDataParallel
under torchrun, and progress lines and TensorBoard scalars (:mod:`adlnmt.train.monitor`)."""

from __future__ import annotations

import gc
import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from adlnmt.data.data_dir import DataDir
from adlnmt.data.dataset import Batch, collate
from adlnmt.data.stream import EpochBatches, EpochPlan, ShardedTrainData, dealt_after
from adlnmt.data.vocab import PAD
from adlnmt.devices import check_cpu_count
from adlnmt.errors import UserError
from adlnmt.memory import release_heap
from adlnmt.model import Seq2Seq
from adlnmt.speedups import SPEEDUPS
from adlnmt.store import ModelDir, new_model_id
from adlnmt.store.atomic import copy_atomic, describe
from adlnmt.store.model_dir import validation_score
from adlnmt.store.names import MODEL_ID, VOCAB_HASHES
from adlnmt.train import checkpoint as ckpt
from adlnmt.train.config import TrainConfig
from adlnmt.train.device import pick_device, precision_setup, use_deterministic_kernels
from adlnmt.train.init_from import check_same_source, init_model_config, initialise_from, recorded_options
from adlnmt.train.launch import adopt_slurm_environment
from adlnmt.train.lock import DirectoryLock
from adlnmt.train.loss import projected_cross_entropy
from adlnmt.train.model_dir import (
    changed_settings,
    check_model_folder,
    check_same_run,
    data_digest,
    own_vocabularies,
    read_stored_config,
    write_vocabularies,
)
from adlnmt.train.monitor import Board, Interval, progress_line, tensorboard_dir
from adlnmt.train.schedule import Schedule
from adlnmt.train.signals import StopSignals
from adlnmt.train.validation import validate

HEAP_RELEASE_UPDATES = 10  # on the CPU, hand freed heap back to the OS this often (adlnmt.memory)


class TrainingError(UserError):
    """Training cannot go on (e.g. a non-finite loss with --on-nan stop)."""


@dataclass
class Progress:
    """Counters saved with every checkpoint (all plain numbers, so the state loads without pickle)."""

    update: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of this epoch already consumed (this rank's shard)
    shuffle_window: int = 0  # the window of this epoch (adlnmt.data.stream) that holds the next batch ...
    batch_in_shuffle_window: int = 0  # ... and the next batch's place in it (this rank's batches ...
    dealt_in_shuffle_window: int = 0  # ... after those of it dealt before a resume with another number of ranks)
    best: float | None = None  # best validation score (ppl: lower; bleu: higher)
    best_update: int = 0
    bad_checkpoints: int = 0  # checkpoints since the best one
    train_seconds: float = 0.0  # training time over all sessions (for --max-minutes)
    skipped_updates: int = 0
    window_loss: float = 0.0  # summed loss/token × tokens since the last checkpoint (its train_loss) ...
    window_tokens: int = 0  # ... and those tokens: kept so that a resumed run logs the same train_loss ...
    window_seconds: float = 0.0  # ... and the training time they took (its tokens_per_s)


def make_optimizer(model: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW as configured; fused (one kernel for all parameters: faster steps on the CPU, benchmarks/NOTES.md)
    where available."""
    return torch.optim.AdamW(
        model.parameters(),
        lr=config.lr,
        betas=(config.adam_beta1, config.adam_beta2),
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
        fused=device.type in ("cpu", "cuda"),
    )


@contextmanager
def fits_in_memory(device: torch.device) -> Iterator[None]:
    """A UserError instead of the allocator's traceback when the model does not fit in the memory of ``device``."""
    try:
        yield
    except RuntimeError as err:  # torch.OutOfMemoryError (CUDA) or the CPU allocator's RuntimeError
        if not isinstance(err, torch.OutOfMemoryError) and "can't allocate memory" not in str(err):
            raise
        raise UserError(f"the model does not fit in the memory of {device} (a request for more than there is); "
                        "choose a smaller one (--d-model, --d-ff, fewer layers)") from None  # fmt: skip


def _manifest_lengths(data: DataDir) -> dict[str, dict[str, int | None]]:
    """The manifest's longest ``source`` and ``target`` sequence of the ``train`` and ``valid`` splits, in positions
    (markers and EOS counted; None where it does not count them)."""
    splits = data.manifest["splits"]
    return {name: {"source": splits.get(name, {}).get("max_src_len"), "target": splits.get(name, {}).get("max_tgt_len")}
            for name in ("train", "valid")}  # fmt: skip


def check_positions(model: Seq2Seq, data: DataDir) -> None:
    """A UserError, before the first update, when a sentence of the training or validation data is longer than the
    model's learned positions cover (:meth:`~adlnmt.model.Seq2Seq.position_limits`), saying how to fix it."""
    limits = dict(zip(("source", "target"), model.position_limits(), strict=True))
    if all(limit is None for limit in limits.values()):
        return
    for name, counted in _manifest_lengths(data).items():
        if all(limits[side] is None or (n is not None and n <= limits[side]) for side, n in counted.items()):
            continue  # the manifest's longest fit: no shard is opened (start-up stays independent of corpus size)
        before = 0  # sentences in the split's earlier shards
        for index in range(len(data.shards(name))):
            split = data.open_shard(name, index)
            for side, lengths in (("source", split.src_lengths), ("target", split.tgt_lengths)):
                limit = limits[side]
                if limit is None or not len(lengths) or int(lengths.max()) <= limit:
                    continue
                longest = int(lengths.max())
                raise UserError(
                    f"{data.path}: {name} {side} sentence {before + int(lengths.argmax()) + 1} needs {longest} "
                    f"positions (markers and EOS counted), but the learned positions cover {limit}: raise "
                    f"--max-positions (and any learn_pos(max_len=N) the ADL writes out, which it does not change) to "
                    f"{longest} or more, or prepare the data with a smaller --max-len"
                )
            before += len(split)


def longest_sequence(data: DataDir) -> int:
    """The most positions a side of the training or validation data needs (the manifest's count; 0 if it has none)."""
    return max((n for sides in _manifest_lengths(data).values() for n in sides.values() if n is not None), default=0)


class Trainer:
    """One training run of a :class:`TrainConfig`: builds or resumes the model directory, then :meth:`train`."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        adopt_slurm_environment()  # under srun with several tasks: rank and world size from SLURM's environment
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        # Under torchrun (even with one process: NCCL/DDP then run as they would on many GPUs).
        self.distributed = self.world > 1 or "TORCHELASTIC_RUN_ID" in os.environ
        self.rank = int(os.environ.get("RANK", "0"))
        self.device = pick_device(config.device, int(os.environ.get("LOCAL_RANK", "0")))
        self.owns_process_group = self.distributed and not dist.is_initialized()
        if self.owns_process_group:
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
        check_cpu_count("--threads", config.threads)
        if config.threads > 0:
            torch.set_num_threads(config.threads)
        self.scaler = precision_setup(config.precision, self.device)
        if config.deterministic:
            use_deterministic_kernels()
        self.main = self.rank == 0
        if not config.data or not config.model:
            raise UserError("train needs --data DIR and --model DIR")
        self.dir = Path(config.model)
        check_model_folder(self.dir)  # never training into a data folder or any other one
        self.files = ModelDir(self.dir)
        made = self.main and not self.dir.exists()  # removed again should the run be refused before it starts
        self.lock = DirectoryLock(self.dir) if self.main else None  # rank 0 writes; released by close()
        self.board: Board | None = None
        self.grad_norm = math.nan  # of the last update (NaN when nothing clips or shows it)
        # Settings a resume changed: in the next metrics record, and (all resumes) in config.json.
        self.changed: dict[str, dict[str, Any]] = {}
        self.change_history: list[dict[str, Any]] = []
        try:
            self._setup()
        except BaseException:
            self.close()
            if made:  # nothing trained: no directory of the lock file (and vocabularies) alone left behind
                shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def _setup(self) -> None:
        config = self.config
        self.data = DataDir.load(config.data)
        self.train_data = ShardedTrainData(self.data)
        self.model_config = (
            init_model_config(config, self.data)
            if config.init_from
            else config.model_config(self.data.src_vocab.size, self.data.tgt_vocab.size)
        )
        if config.init_from:  # the sizes MODEL brings, not the defaults, in config.json and compared on resume
            self.config = config = recorded_options(config, self.model_config)
        check_same_run(self.dir, asdict(config), self.model_config, self.data)
        self.model_id = self.files.model_id() or new_model_id()  # kept by every resume
        self.vocab_hashes = own_vocabularies(self.dir, self.data)
        torch.manual_seed(config.seed)
        with fits_in_memory(self.device):
            self.model = Seq2Seq(self.model_config).to(self.device)
            self.optimizer = make_optimizer(self.model, config, self.device)
        check_positions(self.model, self.data)
        self.schedule = Schedule(config)
        self.progress = Progress()
        self._resume()
        if config.init_from and self.progress.update == 0:
            initialise_from(self.model, Path(config.init_from), self.dir if self.main else None, self.log)
        elif config.init_from:
            check_same_source(Path(config.init_from), self.dir)
        board_dir = tensorboard_dir(config.tensorboard, self.dir)
        if board_dir is not None and self.main:
            self.board = Board(board_dir, self.progress.update)
        self.network = (
            DistributedDataParallel(self.model, device_ids=[self.device] if self.device.type == "cuda" else None)
            if self.distributed
            else self.model
        )
        if config.compile:  # the training forward and backward only; self.model (validation, saving) stays eager
            self.model.cover_positions(longest_sequence(self.data), self.device)
            self.network = torch.compile(self.network, dynamic=True)

    def close(self) -> None:
        """Release the model directory (its lock) and the process group this trainer opened, with the DDP wrapper
        that holds it: a gloo group (or its last work) left alive until interpreter exit can abort the process
        ("terminate called without an active exception"), so both are freed here, while the interpreter runs."""
        if self.board is not None:
            self.board.close()
            self.board = None
        if self.lock is not None:
            self.lock.release()
        if self.owns_process_group and dist.is_initialized():
            if hasattr(self, "model"):
                self.network = self.model  # the DDP wrapper's reducer holds the group: dropped, and its cycles
            gc.collect()  # collected, before the group goes
            dist.destroy_process_group()
            self.owns_process_group = False

    # --- model directory ----------------------------------------------------------------------

    def _stored_config(self) -> dict[str, Any]:
        return {
            "train": asdict(self.config),
            "model": self.model_config.to_dict(),
            "data_digest": data_digest(self.data),
            VOCAB_HASHES: self.vocab_hashes,
            MODEL_ID: self.model_id,
            "canonical": {},
            "version": 1,
            "changed_settings": self.change_history,
        }

    def _write_config(self) -> None:
        stored = self._stored_config()
        stored["canonical"] = {"encoder": self.model.canonical_encoder, "decoder": self.model.canonical_decoder}
        stored["parameters"] = self.model.parameter_count()
        write_vocabularies(self.data, self.dir)  # before the first config.json: a model's vocabulary is written once
        self.files.write_config(stored)

    # --- state ------------------------------------------------------------------------------------

    def _state(self, rank_rng: list[Tensor]) -> dict[str, Any]:
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "progress": asdict(self.progress),
            "rng_cpu": torch.get_rng_state(),
            "rng_ranks": rank_rng,
            "scaler": self.scaler.state_dict(),
        }
        if torch.cuda.is_available():
            state["rng_cuda"] = torch.cuda.get_rng_state_all()
        return state

    def _rank_rng(self) -> list[Tensor]:
        """Every rank's CPU RNG state (dropout masks differ per rank), gathered on all ranks: a collective, so every
        rank calls it at each checkpoint; a resumed rank restores its own and continues exactly."""
        mine = torch.get_rng_state()
        if self.world == 1:
            return [mine]
        gathered: list[Any] = [None] * self.world
        dist.all_gather_object(gathered, mine)
        return gathered

    def _load_state(self, path: Path) -> dict[str, Any]:
        """Load the training state in ``path`` into this trainer; UserError naming it when it does not fit."""
        state = ckpt.load_state(path)
        ckpt.check_state(state, path)
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.schedule.load_state_dict(state["schedule"])
            progress = state["progress"]
            if "shuffle_window" not in progress:  # a state of before the shuffle windows: its epoch was one window
                progress = {**progress, "shuffle_window": 0, "batch_in_shuffle_window": progress["batch_in_epoch"]}
            self.progress = Progress(**progress)
            ranks = state.get("rng_ranks") or [state["rng_cpu"]]
            if len(ranks) != self.world:  # another number of ranks: deal the rest of the window among these
                p = self.progress
                p.dealt_in_shuffle_window = dealt_after(
                    p.dealt_in_shuffle_window, p.batch_in_shuffle_window, len(ranks)
                )
                p.batch_in_shuffle_window = 0
                self.log(f"{path} was saved by {len(ranks)} ranks, this run has {self.world}: the batches of window "
                         f"{p.shuffle_window + 1} after its first {p.dealt_in_shuffle_window} are dealt among these "
                         "(dropout's random streams continue from rank 0's)")  # fmt: skip
            torch.set_rng_state(ranks[self.rank] if len(ranks) == self.world else state["rng_cpu"])
            if "rng_cuda" in state and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(state["rng_cuda"])
            if state.get("scaler"):
                self.scaler.load_state_dict(state["scaler"])
        except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as err:
            raise UserError(f"{path}: does not fit this run ({describe(err)})") from None
        self.schedule.apply(self.optimizer)
        return state

    def _resume(self) -> None:
        """Continue from the newest intact training state (damaged newer ones are reported and dropped). Training
        outputs without any usable state are refused: never a silent restart from update 0."""
        if self.main:
            ckpt.remove_temporaries(self.dir)
        problems = []
        for path in ckpt.saved_states(self.dir):
            try:
                state = self._load_state(path)
            except UserError as err:
                problems.append(str(err))
                continue
            for problem in problems:
                self.log(f"warning: {problem}; skipped")
            self.log(f"resuming at update {self.progress.update} (epoch {self.progress.epoch + 1}) from {path}")
            self._note_changes()
            if self.distributed:
                dist.barrier()  # every rank has read its state before rank 0 tidies the directory
            if self.main:
                self._tidy_after_resume(state["model"])
            return
        self._start_fresh(problems)

    def _note_changes(self) -> None:
        """Record the settings this resume changes (checkpoint interval, patience ...: RESUMABLE_CHANGES). A change
        made by an earlier session that ended before its first checkpoint (its entry is at this resume's update) is
        not yet in metrics.jsonl: it is merged with this one, to be written with the next checkpoint."""
        if not self.files.exists():
            return
        stored = read_stored_config(self.dir)
        now = changed_settings(stored["train"], asdict(self.config))
        self.change_history = list(stored.get("changed_settings", []))
        unlogged: dict[str, dict[str, Any]] = {}
        if self.change_history and self.change_history[-1]["update"] == self.progress.update:
            unlogged = self.change_history.pop()["changed"]
        merged = {name: {"before": unlogged.get(name, change)["before"], "now": change["now"]}
                  for name, change in (unlogged | now).items()}  # fmt: skip
        self.changed = {name: change for name, change in merged.items() if change["before"] != change["now"]}
        if self.changed:
            self.change_history.append({"update": self.progress.update, "changed": self.changed})
        if now:
            self.log("changed on resume: " + ", ".join(f"{k} {v['before']} -> {v['now']}" for k, v in now.items()))

    def _start_fresh(self, problems: list[str]) -> None:
        """Start at update 0, unless the directory shows a committed checkpoint (best.safetensors, or checkpoints of
        two updates) whose state is gone or damaged: refused, never a silent restart. A first checkpoint cut short
        before its state was written is discarded."""
        records, _ = self.files.metrics()
        updates = sorted({u for u, _ in self.files.checkpoint_files()} | {r["update"] for r in records})
        if problems or len(updates) > 1 or self.files.best_weights.is_file():
            found = "; ".join(problems) or "it holds checkpoints but no training state (states/update-*.state.pt)"
            raise UserError(
                f"{self.dir}: cannot resume: {found}. Nothing was changed; to start over, move the directory away "
                "or choose a new --model directory"
            )
        if updates and self.main:
            self.log(f"discarding the checkpoint of update {updates[0]}: cut short before its state was written")
            ckpt.discard_after(self.dir, 0)
            self.files.write_metrics([])

    def _tidy_after_resume(self, weights: dict[str, Tensor]) -> None:
        """Make the directory what an uninterrupted run would have at this update: drop newer (uncommitted or
        damaged) checkpoint files and metrics records, a partial metrics line, and redo the steps after a commit."""
        update = self.progress.update
        for path in ckpt.discard_after(self.dir, update):
            self.log(f"removed {path} (newer than the state resumed from)")
        records, partial = self.files.metrics()
        kept = [r for r in records if r["update"] <= update]
        if partial or len(kept) < len(records):
            dropped = f"{self.files.metrics_file}: dropped {len(records) - len(kept)} records after update {update}"
            self.log(partial or dropped)
            self.files.write_metrics(kept)
        current = self.files.weights_path(update)
        if not ckpt.weights_match(current, weights):
            self.log(f"{current}: missing or damaged; rewritten from the training state")
            ckpt.save_weights(self.model, current, self.model_id)
        self._after_commit()

    def log(self, message: str) -> None:
        if self.main:
            tqdm.write(message, file=sys.stderr)

    # --- one update -------------------------------------------------------------------------------

    def _loss(self, batch: Batch) -> Tensor:
        """Summed label-smoothed cross-entropy of a batch (fused with the output projection, see
        :mod:`adlnmt.train.loss`, unless switched off)."""
        fused = SPEEDUPS.fused_loss
        with torch.autocast(self.device.type, dtype=self._amp_dtype(), enabled=self._amp_dtype() is not None):
            out = self.network(batch.src, batch.tgt_in, project=not fused)  # [B, T, d_out] or logits [B, T, V]
            if fused:
                projection = self.model.output
                return projected_cross_entropy(
                    out, projection.weight, projection.bias, batch.tgt_out, self.config.label_smoothing
                )
        return F.cross_entropy(
            out.float().flatten(0, 1),
            batch.tgt_out.flatten(),
            ignore_index=PAD,
            label_smoothing=self.config.label_smoothing,
            reduction="sum",
        )

    def _amp_dtype(self) -> torch.dtype | None:
        """Autocast dtype: bf16 (CUDA, or a CPU with AMX/AVX-512 bf16) or fp16 (CUDA); None for fp32."""
        if self.config.precision == "fp32":
            return None
        return torch.bfloat16 if self.config.precision == "bf16" else torch.float16

    def _update(self, batches: list[Batch]) -> tuple[float, int]:
        """One optimizer update over ``batches`` (gradient accumulation); returns (loss/token, tokens). The device is
        read once, after the backward passes (loss, tokens, finite check and gradient norm in one transfer): on a GPU
        each read waits for the device."""
        if (self.progress.update + 1) % HEAP_RELEASE_UPDATES == 0 and self.device.type == "cpu":
            release_heap()
        tokens = torch.full((), float(sum(b.tgt_tokens for b in batches)), device=self.device)  # a fill, not a copy
        if self.distributed:
            dist.all_reduce(tokens)
        total_loss = torch.zeros((), device=self.device)
        self.optimizer.zero_grad(set_to_none=True)
        for i, batch in enumerate(batches):
            sync = i == len(batches) - 1 or not self.distributed
            context = self.network.no_sync() if not sync else nullcontext()
            with context:
                loss = self._loss(batch)
                # DDP averages gradients over ranks, hence × world: the update is the global mean per token.
                self.scaler.scale(loss * self.world / tokens).backward()
            total_loss += loss.detach()
        finite = torch.isfinite(total_loss).float()
        if self.distributed:
            dist.all_reduce(total_loss)
            dist.all_reduce(finite, op=dist.ReduceOp.MIN)
        c = self.config
        read = [finite, total_loss, tokens]
        if measured := c.clip_norm > 0 or c.log_interval > 0 or c.tensorboard != "off":  # the norm is clipped or shown
            self.scaler.unscale_(self.optimizer)
            # Without clipping, an infinite bound only measures (gradients × 1.0: unchanged). Gradients of a
            # non-finite loss are clipped too, then dropped with their update below.
            read.append(torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.clip_norm or math.inf).float())
        is_finite, loss_sum, token_count, *norm = torch.stack(read).tolist()  # the update's one read of the device
        if measured:
            self.grad_norm = norm[0]
        if is_finite < 1:
            self.progress.skipped_updates += 1
            message = f"update {self.progress.update + 1}: non-finite loss ({loss_sum})"
            if c.on_nan == "stop":
                raise TrainingError(message + "; stopping (--on-nan stop)")
            self.log(message + "; update skipped")
            self.optimizer.zero_grad(set_to_none=True)
            self.grad_norm = math.nan
            if measured:
                self.scaler.update()  # the scaler's unscale_ needs its update (fp16: the scale backs off)
            return math.nan, int(token_count)
        self.schedule.step_update(self.optimizer, self.progress.update + 1)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss_sum / token_count, int(token_count)

    # --- validation and checkpoints ----------------------------------------------------------------

    def validate(self) -> dict[str, float]:
        """Validation perplexity and, unless switched off, greedy BLEU (:mod:`adlnmt.train.validation`)."""
        return validate(self.model, self.data, self.config.batch_tokens, self.config.valid_bleu, self.device)

    def _score(self, metrics: dict[str, float]) -> float:
        """Higher is better (:func:`adlnmt.store.model_dir.validation_score`)."""
        return validation_score(metrics, self.config.early_stop_metric)

    def _scores(self) -> dict[int, float]:
        """Score of every checkpoint so far (from metrics.jsonl; a later line for an update wins)."""
        return {record["update"]: self._score(record) for record in self.files.checkpoint_records()}

    def checkpoint(self, train_loss: float, tokens_per_second: float) -> bool:
        """Validate, update best/patience/learning rate, save; returns True when patience ran out."""
        metrics = self.validate() if self.main else {}
        if self.distributed:
            shared = [metrics]
            dist.broadcast_object_list(shared, src=0)
            metrics = shared[0]
        p = self.progress
        score = self._score(metrics)
        improved = p.best is None or score > p.best
        if improved:
            p.best, p.best_update, p.bad_checkpoints = score, p.update, 0
        else:
            p.bad_checkpoints += 1
        self.schedule.step_checkpoint(self.optimizer, improved)
        record = {
            "update": p.update,
            "epoch": p.epoch + (1 if p.batch_in_epoch else 0),  # of the last update: an epoch's last moves p.epoch on
            "train_loss": train_loss,
            **metrics,
            "lr": self.optimizer.param_groups[0]["lr"],
            "tokens_per_s": tokens_per_second,
            "train_minutes": p.train_seconds / 60,
            "best_update": p.best_update,
        }
        if self.changed:
            record["changed_settings"], self.changed = self.changed, {}
        rank_rng = self._rank_rng()
        if self.main:
            self.save(record, rank_rng)
            if self.board is not None:
                self.board.validation(p.update, record)
            bleu = f" bleu {metrics['valid_bleu']:.2f}" if "valid_bleu" in metrics else ""
            self.log(
                f"checkpoint {p.update}: train loss {train_loss:.3f} valid ppl {metrics['valid_ppl']:.2f}{bleu} "
                f"lr {record['lr']:.2e} {tokens_per_second:.0f} tok/s{' (best)' if improved else ''}"
            )
        return self.config.patience > 0 and p.bad_checkpoints >= self.config.patience

    def save(self, record: dict[str, Any] | None, rank_rng: list[Tensor]) -> Path:
        """Write the checkpoint of this update: weights, its metrics ``record`` (None: an interruption's checkpoint,
        no validation), then the training state (with every rank's RNG ``rank_rng``), which commits it; returns the
        state's path."""
        update = self.progress.update
        ckpt.save_weights(self.model, self.files.weights_path(update), self.model_id)
        if record is not None:
            self.files.append_metrics(record)
        state = self.files.state_path(update)
        ckpt.save_state(self._state(rank_rng), state)
        self._after_commit()
        return state

    def _after_commit(self) -> None:
        """The steps after a checkpoint's commit (redone on resume): best.safetensors when it is the best, pruning."""
        p, c = self.progress, self.config
        if p.best_update == p.update:
            copy_atomic(self.files.weights_path(p.update), self.files.best_weights)
        ckpt.prune(self.dir, c.keep_last, c.keep_best, self._scores(), current=p.update)

    # --- the loop ---------------------------------------------------------------------------------

    def _met_already(self) -> str:
        """The stopping criterion the resumed state already meets ("" when none): a finished run run again, or a
        resume with a lower limit, stops before any update, as the run it continues stopped or would have."""
        c, p = self.config, self.progress
        if c.max_updates and p.update > c.max_updates:
            return f"already at update {p.update}, past --max-updates {c.max_updates}"
        if c.max_updates and p.update == c.max_updates:
            return f"reached {c.max_updates} updates"
        if c.max_minutes and p.train_seconds >= c.max_minutes * 60:
            return f"reached {c.max_minutes:g} minutes"
        if c.patience and p.bad_checkpoints >= c.patience:
            return f"no improvement for {c.patience} checkpoints"
        return ""

    def _out_of_time(self, elapsed: float) -> bool:
        """Whether ``elapsed`` training seconds (rank 0's, under DDP) reach --max-minutes."""
        if self.config.max_minutes <= 0:
            return False
        if not self.distributed:
            return elapsed >= self.config.max_minutes * 60
        over = torch.tensor(float(elapsed >= self.config.max_minutes * 60), device=self.device)  # NCCL: on the GPU
        dist.broadcast(over, src=0)
        return bool(over.item())

    def _stop_signal(self, signals: StopSignals) -> int:
        """The stop signal received (0: none); under DDP any rank's, so that every rank stops at the same update."""
        if not self.distributed:
            return int(signals.received or 0)
        received = torch.tensor(float(signals.received or 0), device=self.device)  # NCCL: on the GPU
        dist.all_reduce(received, op=dist.ReduceOp.MAX)
        return int(received.item())

    def train(self) -> dict[str, Any]:
        """Train until a stopping criterion or a stop signal; returns the reason, updates, best update and the
        stop signal's name ("" when none). Releases the model directory at the end."""
        try:
            with StopSignals(announce=self.main) as signals:
                result = self._train(signals)
            if self.distributed:
                dist.barrier()  # no rank tears the group down while another still talks to it
            return result
        finally:
            self.close()

    def _train(self, signals: StopSignals) -> dict[str, Any]:
        c, p = self.config, self.progress
        if self.main:
            self._write_config()
        self.model.train()
        session_start, session_base = time.monotonic(), p.train_seconds
        window_start = time.monotonic() - p.window_seconds
        interval = Interval()
        bar = tqdm(total=c.max_updates or None, initial=p.update, disable=None if (self.main and c.progress) else True,
                   unit="upd", dynamic_ncols=True)  # fmt: skip
        reason = self._met_already()
        stopped_by = ""
        plan = EpochPlan(self.train_data, c.batch_tokens, c.seed, c.shuffle_buffer, c.temperature,
                         c.batching == "mixed", self.rank, self.world)  # fmt: skip
        if len(plan.counts) > 1:
            shares = ", ".join(f"{name} {n} pairs ({share:.1%})" for name, (n, share) in plan.proportions().items())
            self.log(f"each epoch draws {plan.pairs} pairs: {shares}")
        while not reason:
            if c.max_epochs and p.epoch >= c.max_epochs:
                reason = f"reached {c.max_epochs} epochs"
                break
            batches = EpochBatches(plan, p.epoch, p.shuffle_window, p.batch_in_shuffle_window,
                                   p.dealt_in_shuffle_window)  # fmt: skip
            epoch_over = batches.done
            while not (epoch_over or reason):
                group = batches.take(c.accumulate)
                loss, tokens = self._update([collate(self.train_data, ix).to(self.device) for ix in group])
                p.batch_in_epoch += len(group)
                p.shuffle_window, p.dealt_in_shuffle_window, p.batch_in_shuffle_window = batches.position
                p.update += 1
                p.train_seconds = session_base + time.monotonic() - session_start
                p.window_seconds = time.monotonic() - window_start
                if not math.isnan(loss):
                    p.window_loss += loss * tokens
                    p.window_tokens += tokens
                bar.update(1)
                interval.add(loss, tokens, self.grad_norm)
                if c.log_interval and p.update % c.log_interval == 0:
                    self._progress_line(interval)
                    interval = Interval()
                rate = p.window_tokens / max(p.window_seconds, 1e-9)
                bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{rate:.0f}", epoch=p.epoch + 1)
                if batches.done:  # the saved position always points at the next batch
                    p.epoch, p.batch_in_epoch, p.shuffle_window, p.batch_in_shuffle_window = p.epoch + 1, 0, 0, 0
                    p.dealt_in_shuffle_window = 0
                    epoch_over = True
                if c.max_updates and p.update >= c.max_updates:
                    reason = f"reached {c.max_updates} updates"
                elif c.max_epochs and p.epoch >= c.max_epochs:
                    reason = f"reached {c.max_epochs} epochs"
                elif self._out_of_time(p.train_seconds):
                    reason = f"reached {c.max_minutes:g} minutes"
                saved = bool(reason) or p.update % c.checkpoint_interval == 0
                if saved:
                    train_loss = p.window_loss / max(p.window_tokens, 1)
                    rate = p.window_tokens / max(p.window_seconds, 1e-9)
                    p.window_loss, p.window_tokens, p.window_seconds = 0.0, 0, 0.0
                    if self.checkpoint(train_loss, rate) and not reason:
                        reason = f"no improvement for {c.patience} checkpoints"
                    window_start = time.monotonic()
                if not reason and (number := self._stop_signal(signals)):
                    stopped_by = signal.Signals(number).name
                    reason = f"{stopped_by} received"
                    self._interrupted(stopped_by, saved)
        bar.close()
        self.log(f"training stopped: {reason}; best checkpoint at update {p.best_update}")
        return {"reason": reason, "updates": p.update, "best_update": p.best_update, "signal": stopped_by}

    def _progress_line(self, interval: Interval) -> None:
        """The ``--log-interval`` line on stderr (beside the bar on a terminal) and the TensorBoard train scalars."""
        if not self.main:
            return
        p, lr, summary = self.progress, self.optimizer.param_groups[0]["lr"], interval.summary()
        self.log(progress_line(p.update, self.config.max_updates, p.epoch + 1, lr, summary))
        if self.board is not None:
            self.board.train(p.update, lr, summary)

    def _interrupted(self, name: str, saved: bool) -> None:
        """After a stop signal: the checkpoint of this update (unless one was just written), without validation."""
        rank_rng = [] if saved else self._rank_rng()
        if not self.main:
            return
        state = self.files.state_path(self.progress.update) if saved else self.save(None, rank_rng)
        self.log(f"{name}: checkpoint of update {self.progress.update} written ({state}); "
                 "run the same command again to resume")  # fmt: skip
