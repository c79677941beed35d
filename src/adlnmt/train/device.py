"""The device a run trains on and its numeric precision: picking the device (one GPU per process under torchrun),
checking the precision against it, and deterministic kernels."""

from __future__ import annotations

import os

import torch

from adlnmt.devices import checked_device
from adlnmt.errors import UserError
from adlnmt.memory import limit_onednn_cache


def pick_device(name: str, local_rank: int) -> torch.device:
    if name != "auto":
        checked_device(name)
    if name in ("auto", "cuda") and torch.cuda.is_available():
        # this process's GPU (under torchrun or srun: one per process; where SLURM shows each task only its own GPU,
        # that one)
        return torch.device(f"cuda:{local_rank % torch.cuda.device_count()}")
    return torch.device("cpu" if name == "auto" else name)


def full_fp32() -> dict[str, bool]:
    """IEEE fp32 in every matrix product, convolution and RNN kernel (no TF32: PyTorch's default lets cuDNN's
    convolutions and RNNs use it on Ampere and later GPUs), so fp32 on a GPU is the arithmetic of fp32 on a CPU.
    Returns :func:`tf32_allowed` (recorded with a run's results). Set through the ``allow_tf32`` flags: PyTorch
    refuses to read them once its newer per-operator ``fp32_precision`` settings have been used."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    return tf32_allowed()


def tf32_allowed() -> dict[str, bool]:
    """Whether fp32 matrix products and cuDNN kernels (convolutions, RNNs) may round to TF32."""
    return {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32}


def precision_setup(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """Check ``precision`` against the device, make fp32 full fp32 (:func:`full_fp32`), cap oneDNN's primitive
    cache for bf16 on the CPU (adlnmt.memory), and return the loss scaler (active for fp16 on CUDA only)."""
    if precision == "fp32":
        full_fp32()
    if precision == "fp16" and device.type != "cuda":
        raise UserError("--precision fp16 needs a CUDA device; on the CPU use bf16 (or fp32)")
    if precision == "bf16" and device.type == "cpu":
        limit_onednn_cache()
    return torch.amp.GradScaler("cuda", enabled=precision == "fp16")


def use_deterministic_kernels() -> None:
    """Deterministic kernels only (an error for an op that has none): needed on CUDA, where atomics make sums such as
    embedding gradients order-dependent; cuBLAS needs its workspace fixed before its first use for the same."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
