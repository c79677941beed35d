"""Which finished runs may share a row: only runs computed in one arithmetic, IEEE fp32, whether they trained on a
CPU or a GPU. A GPU run departs from it where PyTorch let TF32 in: matrix products with
``torch.backends.cuda.matmul.allow_tf32`` (off by default), cuDNN's convolutions and RNNs with
``torch.backends.cudnn.allow_tf32`` (on by default). Runs record both flags since 2026-11-26 (``tf32_allowed``);
for a GPU run from before, PyTorch's defaults are assumed, so it departs only if its model has a cuDNN layer
(:func:`adlnmt.layers.builder.uses_cudnn`). A run set apart keeps its result.json (it is not trained again) and is
named in the report and the claims, but no row, comparison or verdict reads it.
"""

from __future__ import annotations

from adlnmt.experiment.results import RunResult
from adlnmt.experiment.runner import Run
from adlnmt.layers.builder import uses_cudnn

PYTORCH_DEFAULTS = {"matmul": False, "cudnn": True}  # torch.backends.{cuda.matmul,cudnn}.allow_tf32
SET_APART_NOTE = (
    "Set apart, in no row, comparison or verdict (runs share a row only in one arithmetic, IEEE fp32, on a CPU or "
    "a GPU; to count one, delete its result.json and run the grid again: this version trains in fp32 with TF32 off)"
)


def departure(result: RunResult) -> str | None:
    """How the run's arithmetic departed from IEEE fp32, or None where it did not."""
    if result.provenance.precision != "fp32":
        return f"{result.provenance.precision} precision"
    if not result.device.startswith("cuda"):
        return None
    recorded = result.provenance.tf32_allowed
    allowed = recorded if recorded is not None else PYTORCH_DEFAULTS
    assumed = "" if recorded is not None else " (PyTorch's default; the run predates the record)"
    if allowed.get("matmul"):
        return f"TF32 allowed in matrix products{assumed}"
    if allowed.get("cudnn") and any(uses_cudnn(adl) for adl in result.canonical.values()):
        return f"TF32 allowed in cuDNN's convolutions and RNNs{assumed}"
    return None


def row_result(run: Run) -> RunResult | None:
    """The run's result where it may share a row (finished, in IEEE fp32), else None."""
    result = run.result()
    return result if result is not None and departure(result) is None else None


def set_apart(runs: list[Run]) -> list[str]:
    """The finished runs no row reads, each with its machine and why: "COMET seed 2 (NVIDIA H200: TF32 …)"."""
    return [
        f"{run.variant.name} seed {run.seed} ({result.machine().kind}: {why})"
        for run in runs
        if (result := run.result()) is not None and (why := departure(result)) is not None
    ]
