"""Checkpoint averaging: the parameter-wise mean of the best or last N saved checkpoints of a model directory.

Checkpoint files are written by ``safetensors.torch.save_model``, which stores tied (shared) tensors once;
averaging the stored tensors and writing them with ``save_file`` keeps that layout, so the averaged file loads
with ``safetensors.torch.load_model(model, path, strict=False)`` (:func:`adlnmt.store.load_weights`).
PyTorch is imported only when checkpoints are averaged (not for the command's arguments).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from adlnmt.bounds import at_least, flag_type
from adlnmt.errors import UserError
from adlnmt.flags import OneModel
from adlnmt.store import ModelDir
from adlnmt.store.atomic import names_a_folder, path_flag

if TYPE_CHECKING:
    from torch import Tensor

COUNT = at_least(1)  # of --best and --last


def _open(path: Path):  # -> safetensors' handle (its type is not public)
    from safetensors import safe_open

    if not path.is_file():
        raise UserError(f"{path}: checkpoint not found")
    try:
        return safe_open(str(path), framework="pt", device="cpu")
    except Exception as err:  # safetensors raises several types for damaged files
        raise UserError(f"{path}: not a readable safetensors checkpoint ({err})") from None


def average_checkpoints(paths: list[Path]) -> dict[str, Tensor]:
    """Parameter-wise mean of checkpoints (accumulated in float32, float64 kept), cast back to each dtype.

    Every file must hold the same keys with the same shapes. Non-floating tensors (integer buffers) are not
    averaged: the value of the last file is kept.
    """
    import torch

    if not paths:
        raise UserError("no checkpoints to average")
    paths = [Path(p) for p in paths]
    sums: dict[str, Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    for index, path in enumerate(paths):
        with _open(path) as handle:
            keys = set(handle.keys())
            if index == 0:
                for key in sorted(keys):
                    tensor = handle.get_tensor(key)
                    dtypes[key] = tensor.dtype
                    floating = tensor.is_floating_point()
                    accumulator = torch.promote_types(tensor.dtype, torch.float32) if floating else tensor.dtype
                    sums[key] = tensor.to(accumulator, copy=True)
                continue
            if keys != set(sums):
                missing, extra = sorted(set(sums) - keys), sorted(keys - set(sums))
                raise UserError(
                    f"{path}: its tensors differ from those of {paths[0]} "
                    f"(missing {missing[:3]}, unexpected {extra[:3]}); only checkpoints of one model can be averaged"
                )
            for key in sorted(keys):
                tensor = handle.get_tensor(key)
                if tensor.shape != sums[key].shape:
                    raise UserError(
                        f"{path}: tensor {key!r} has shape {list(tensor.shape)} but {list(sums[key].shape)} "
                        f"in {paths[0]}; only checkpoints of one model can be averaged"
                    )
                if sums[key].is_floating_point():
                    sums[key] += tensor.to(sums[key].dtype)
                else:
                    sums[key] = tensor
    return {
        key: (total / len(paths)).to(dtypes[key]) if total.is_floating_point() else total for key, total in sums.items()
    }


def select_checkpoints(model_dir: Path, best: int | None, last: int | None) -> list[Path]:
    """The ``best`` checkpoints (by the model's own early-stopping metric, as training kept them: lowest validation
    perplexity or highest validation BLEU; ties: newer first; a NaN or infinite score never counts) or the ``last``
    (newest) ones, oldest first.

    Only checkpoint files that exist count; asking for more than exist is an error.
    """
    files = ModelDir(model_dir)
    if (best is None) == (last is None):
        raise UserError("give exactly one of --best N and --last N")
    count = best if best is not None else last
    kind = "best" if best is not None else "last"
    assert count is not None
    if not COUNT.holds(count):
        raise UserError(f"--{kind} {COUNT.refusal(count)}")
    weights = files.checkpoints()
    if best is not None:
        scores = files.checkpoint_scores()
        scored = [update for update in weights if update in scores]
        ranked = sorted((u for u in scored if math.isfinite(scores[u])), key=lambda u: (-scores[u], -u))
        if scored and not ranked:
            raise UserError(f"{files.metrics_file}: no checkpoint has a finite validation score (updates "
                            f"{', '.join(map(str, scored))}: NaN or infinite, a diverged run?), so none is a best "
                            "checkpoint to average")  # fmt: skip
        available = len(ranked)
        chosen = ranked[:count]
    else:
        available = len(weights)
        chosen = list(weights)[-count:]
    if available < count:
        which = " with a finite validation score" if best is not None else ""
        raise UserError(
            f"asked for the {kind} {count} checkpoints but {files.checkpoints_dir} holds {available}{which}; "
            "training keeps as many checkpoint files as --keep-last/--keep-best say"
        )
    return [weights[update] for update in sorted(chosen)]


def write_average(model_dir: Path, paths: list[Path], output: Path | None = None) -> Path:
    """Average ``paths`` and write the result atomically (default ``model_dir/averaged.safetensors``)."""
    from safetensors.torch import save_file

    from adlnmt.store.atomic import atomic_write

    output = Path(output) if output is not None else ModelDir(model_dir).averaged_weights
    tensors = average_checkpoints(paths)
    with _open(Path(paths[0])) as handle:
        metadata = dict(handle.metadata() or {})  # save_model's notes on dropped tied names
    metadata["adlnmt_averaged_from"] = ",".join(Path(p).name for p in paths)
    atomic_write(output, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))
    return output


def check_output(model: ModelDir, given: str) -> None:
    """``--output`` (``given``) may replace an earlier average, never the model's best weights, one of its
    checkpoints or a file that holds no weights (a typo's text file); it names a file, not a folder."""
    output = Path(given)
    if names_a_folder(given):
        raise UserError(
            f"--output {given}: a directory; give the file to write (e.g. {output / 'averaged.safetensors'})"
        )
    if not output.is_file():
        return
    if any(output.samefile(path) for path in [model.best_weights, *model.checkpoints().values()] if path.is_file()):
        raise UserError(f"--output {output}: the model's own weights (best or a checkpoint) would be replaced; "
                        "write the average elsewhere (default: MODEL/averaged.safetensors)")  # fmt: skip
    try:
        with _open(output):
            pass
    except UserError:
        raise UserError(f"--output {output}: exists and holds no weights (not a safetensors file); it is not "
                        "replaced") from None  # fmt: skip


def cmd_average(args: argparse.Namespace) -> int:
    model_dir = Path(args.model)
    model = ModelDir(model_dir)
    model.config()  # a damaged config.json is named before anything is written into the directory
    if args.output:
        check_output(model, args.output)
    paths = select_checkpoints(model_dir, args.best, args.last)
    output = write_average(model_dir, paths, Path(args.output) if args.output else None)
    kind = f"best {args.best}" if args.best is not None else f"last {args.last}"
    print(f"averaged the {kind} checkpoints of {model_dir}:")
    for path in paths:
        print(f"  {path}")
    print(f"wrote {output}")
    return 0


def add_average_command(subparsers: argparse._SubParsersAction) -> None:
    """``average --model DIR (--best N | --last N) [--output PATH]``."""
    parser = subparsers.add_parser("average", help="average the weights of the best or last N checkpoints")
    parser.add_argument(
        "--model",
        required=True,
        action=OneModel,
        type=path_flag,
        help="model directory (with checkpoints/ and metrics.jsonl)",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--best",
        type=flag_type(int, COUNT),
        metavar="N",
        help="the N best checkpoints by the model's early-stopping metric (valid ppl, or valid BLEU)",
    )
    which.add_argument("--last", type=flag_type(int, COUNT), metavar="N", help="the N newest checkpoints")
    parser.add_argument("--output", type=path_flag, help="output file (default: MODEL/averaged.safetensors)")
    parser.set_defaults(func=cmd_average)
