"""Options of the tiny model the training tests train."""

from __future__ import annotations

TINY_MODEL = [
    "--encoder", "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm",
    "--decoder", "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "--d-model", "32", "--heads", "4", "--batch-tokens", "600", "--threads", "1", "--no-progress",
]  # fmt: skip
