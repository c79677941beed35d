"""ssru: the layer contract (incremental = full pass, beam reorder, bf16), the parallel scan against the sequential
loop, the equations against an independent NumPy reference, the state, and the decoder-only rule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from adlnmt.adl.errors import ADLError
from adlnmt.adl.registry import Side
from adlnmt.layers import ssru
from adlnmt.layers.base import Context, DecoderState
from adlnmt.layers.ssru import SSRU, loop, scan
from adlnmt.speedups import SPEEDUPS, speedups_off
from layer_contract import build, check_contract, run_steps

CHAINS = [
    "ssru",
    "res_nd(ssru)",
    "res_d(ssru) -> norm",
    "repeat(2, res_nd(ssru) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
]


@pytest.mark.parametrize("adl", CHAINS)
def test_contract(adl: str) -> None:
    check_contract(adl, Side.DECODER)


@pytest.mark.parametrize("adl", CHAINS[:2])
def test_contract_with_the_scan(adl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SPEEDUPS, "ssru_scan", "always")  # on the CPU the default is the loop
    check_contract(adl, Side.DECODER)


def test_the_switch_picks_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(ssru, "scan", lambda f, u: calls.append("scan") or ssru.loop(f, u))
    layer, x = unit(), torch.randn(2, 5, 16)
    for mode, expected in (("accelerator", []), ("always", ["scan"]), ("never", [])):
        calls.clear()
        monkeypatch.setattr(SPEEDUPS, "ssru_scan", mode)
        layer(x, Context())
        assert calls == expected, mode
    with speedups_off("ssru_scan"):
        assert SPEEDUPS.ssru_scan == "never"


def unit(d: int = 16) -> SSRU:
    layer = build("ssru", Side.DECODER, d=d).layer.layers[0].eval()
    assert isinstance(layer, SSRU)
    return layer


@pytest.mark.parametrize("length", [1, 2, 3, 7, 8, 9, 31, 64, 100])
def test_the_parallel_scan_equals_the_sequential_loop(length: int) -> None:
    generator = torch.Generator().manual_seed(length)
    decay = torch.rand(3, length, 5, generator=generator, dtype=torch.float64)
    update = torch.randn(3, length, 5, generator=generator, dtype=torch.float64)
    assert torch.allclose(scan(decay, update), loop(decay, update), rtol=0, atol=1e-12)
    single = scan(decay.float(), update.float())
    assert torch.allclose(single.double(), loop(decay, update), atol=1e-5)


def test_scan_and_loop_give_the_same_gradients() -> None:
    torch.manual_seed(0)
    layer = unit().train()
    x = torch.randn(2, 13, 16, dtype=torch.float64)
    layer.double()
    grads = []
    for mode in ("always", "never"):
        layer.zero_grad()
        SPEEDUPS.ssru_scan, saved = mode, SPEEDUPS.ssru_scan
        try:
            out = layer(x, Context())
        finally:
            SPEEDUPS.ssru_scan = saved
        (out * torch.linspace(-1, 1, out.numel(), dtype=torch.float64).view_as(out)).sum().backward()
        grads.append([p.grad.clone() for p in layer.parameters()])
    for a, b in zip(*grads, strict=True):
        assert torch.allclose(a, b, atol=1e-10)


def numpy_reference(x: np.ndarray, w: np.ndarray, w_f: np.ndarray, b_f: np.ndarray) -> np.ndarray:
    """Kim et al. 2019, Eqs. (SSRU), for one sentence x [T, d]; weights as nn.Linear stores them ([out, in])."""
    c = np.zeros(w.shape[0])
    out = []
    for x_t in x:
        f = 1.0 / (1.0 + np.exp(-(w_f @ x_t + b_f)))
        c = f * c + (1.0 - f) * (w @ x_t)
        out.append(np.maximum(c, 0.0))
    return np.stack(out)


@torch.no_grad()
def test_equations_against_numpy() -> None:
    torch.manual_seed(1)
    layer = unit(d=8)
    assert layer.W.bias is None and tuple(layer.W.weight.shape) == (8, 8) and tuple(layer.forget.weight.shape) == (8, 8)
    assert sum(p.numel() for p in layer.parameters()) == 8 * 8 + 8 * 8 + 8  # W, W_f, b_f
    x = torch.randn(2, 11, 8)
    out = layer(x, Context())
    weights = (layer.W.weight.numpy(), layer.forget.weight.numpy(), layer.forget.bias.numpy())
    for i in range(2):
        expected = numpy_reference(x[i].double().numpy(), *(w.astype(np.float64) for w in weights))
        assert np.allclose(out[i].numpy(), expected, atol=1e-5)


@torch.no_grad()
def test_set_gates() -> None:
    """f = σ(ln 3) = 0.75 everywhere and W = I: c_t = 0.75 c_{t−1} + 0.25 x_t."""
    layer = unit(d=4)
    layer.forget.weight.zero_()
    layer.forget.bias.fill_(float(np.log(3.0)))
    layer.W.weight.copy_(torch.eye(4))
    x = torch.tensor([[[4.0, -4.0, 8.0, 0.0], [4.0, 4.0, 0.0, 0.0]]])  # [1, 2, 4]
    first = 0.25 * x[0, 0]
    second = 0.75 * first + 0.25 * x[0, 1]
    assert torch.allclose(layer(x, Context())[0], torch.stack([first, second]).relu())


@torch.no_grad()
def test_the_state_is_the_cell() -> None:
    layer = unit()
    x = torch.randn(4, 6, 16)
    state = DecoderState(4)
    ctx = Context(state=state)
    layer.init_state(ctx)
    assert torch.equal(state.get(layer, "c"), torch.zeros(4, 16))
    setup = build("ssru", Side.DECODER)
    setup.layer = layer
    stepped = run_steps(setup, x, ctx, 0)
    f, update = layer.gates(x)
    cells = loop(f, update)
    assert torch.allclose(state.get(layer, "c"), cells[:, -1], atol=1e-6)  # the cell c_T, before the ReLU
    assert torch.allclose(stepped, layer(x, Context()), atol=1e-5)


def test_bf16_autocast_keeps_the_cell_in_fp32() -> None:
    layer = unit().train()
    x = torch.randn(2, 40, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        f, update = layer.gates(x)
        out = layer(x, Context())
    assert f.dtype == torch.float32 and update.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_the_encoder_refuses_it_with_a_column() -> None:
    text = "pos -> res_nd(ssru)"
    with pytest.raises(ADLError, match="cannot be used in the encoder") as info:
        build(text, Side.ENCODER)
    assert info.value.column == text.index("ssru")
