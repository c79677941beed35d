"""Which runs share a row: IEEE fp32 on a CPU or a GPU, TF32 only where PyTorch let it in."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adlnmt.experiment.arithmetic import departure

from .sample_results import machine, run_result

TRANSFORMER = {"encoder": "pos -> repeat(2, res(mh_dot_self_att) -> res(ff(64) -> linear))", "decoder": "ff(8)"}
WITH_CONV = {"encoder": "pos -> repeat(2, res(comet_conv) -> res(ff(64) -> linear))", "decoder": "ff(8)"}
WITH_RNN = {"encoder": "birnn(64)", "decoder": "rnn(64) -> mh_dot_src_att"}
OFF, CUDNN_ON, MATMUL_ON = ({"matmul": m, "cudnn": c} for m, c in ((False, False), (False, True), (True, False)))
DEFAULT = "TF32 allowed in cuDNN's convolutions and RNNs (PyTorch's default; the run predates the record)"


@pytest.mark.parametrize(
    ("device", "canonical", "tf32", "expected"),
    [
        ("cpu", WITH_CONV, None, None),  # a CPU has no TF32
        ("cuda:0", TRANSFORMER, None, None),  # before the record: matrix products default to fp32
        ("cuda:0", WITH_CONV, None, DEFAULT),  # ... cuDNN's convolutions to TF32
        ("cuda:0", WITH_RNN, None, DEFAULT),
        ("cuda:0", WITH_CONV, OFF, None),  # recorded off: fp32
        ("cuda:0", WITH_RNN, CUDNN_ON, "TF32 allowed in cuDNN's convolutions and RNNs"),
        ("cuda:0", TRANSFORMER, CUDNN_ON, None),  # no cuDNN layer, so the flag changed nothing
        ("cuda:0", TRANSFORMER, MATMUL_ON, "TF32 allowed in matrix products"),
    ],
)
def test_a_gpu_run_departs_from_fp32_only_where_tf32_was_let_in(device, canonical, tf32, expected) -> None:
    result = run_result(on=machine(device), device=device, canonical=canonical)
    result = replace(result, provenance=replace(result.provenance, tf32_allowed=tf32))
    assert departure(result) == expected


def test_reduced_precision_departs_on_any_device() -> None:
    result = run_result()
    assert departure(replace(result, provenance=replace(result.provenance, precision="bf16"))) == "bf16 precision"
