"""``pos``'s layout and scale: the default is Vaswani et al.'s interleaved table scaled by √d (unchanged); halves is
MarianMT's [sin | cos] table (as ``MarianSinusoidalPositionalEmbedding.create_weight`` builds it, odd widths too);
scale=false adds the table to unscaled embeddings."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from adlnmt.layers.base import Context
from adlnmt.layers.basic import sinusoid_halves, sinusoids
from adlnmt.model import Seq2Seq
from adlnmt.model_config import ModelConfig


def marian_table(positions: int, width: int) -> np.ndarray:
    """MarianMT's table, written out from its definition: angle(t, j) = t / 10000^(2⌊j/2⌋/d); the first ⌈d/2⌉
    columns the sines of the even j, the rest the cosines of the odd j."""
    angles = np.array([[t / np.power(10000, 2 * (j // 2) / width) for j in range(width)] for t in range(positions)])
    return np.concatenate([np.sin(angles[:, 0::2]), np.cos(angles[:, 1::2])], axis=1).astype(np.float32)


@pytest.mark.parametrize("width", [16, 17, 512])
def test_halves_equal_marians_table(width: int) -> None:
    table = sinusoid_halves(torch.arange(300), width).numpy()
    assert np.array_equal(table, marian_table(300, width))


def test_halves_hold_the_interleaved_columns_rearranged() -> None:
    interleaved, halves = sinusoids(torch.arange(50), 16), sinusoid_halves(torch.arange(50), 16)
    assert torch.allclose(torch.cat([interleaved[:, 0::2], interleaved[:, 1::2]], dim=1), halves, atol=1e-5)


def position_layer(pos: str):
    config = ModelConfig(f"{pos} -> repeat(1, res_nd(ffl))", "pos -> res_nd(mh_dot_src_att)", 10, 10, d_model=16,
                         heads=2, dropout=0.0)  # fmt: skip
    return Seq2Seq(config).eval().encoder.layers[0]


@pytest.mark.parametrize(
    ("pos", "scale", "table"),
    [("pos", math.sqrt(16), sinusoids), ("pos(layout=halves)", math.sqrt(16), sinusoid_halves),
     ("pos(layout=halves, scale=false)", 1.0, sinusoid_halves), ("pos(scale=false)", 1.0, sinusoids)],
)  # fmt: skip
def test_pos_scales_and_adds_its_table(pos: str, scale: float, table) -> None:
    x = torch.randn(2, 7, 16)
    expected = scale * x + table(torch.arange(3, 10), 16)
    assert torch.allclose(position_layer(pos)(x, Context(offset=3)), expected, atol=1e-6)
