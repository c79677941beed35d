"""A demo model that has learnt the demo language's agreement (a one-block Transformer, 300 updates: a few
seconds on one core), trained once per session for the forced-decoding and contrastive tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlnmt.cli import main

ONE_BLOCK_ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
ONE_BLOCK_DECODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"


@pytest.fixture(scope="session")
def agreement_model(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model_dir = tmp_path_factory.mktemp("agreement-model")
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(model_dir), "--encoder", ONE_BLOCK_ENCODER,
            "--decoder", ONE_BLOCK_DECODER, "--d-model", "32", "--heads", "4", "--batch-tokens", "800", "--lr", "1e-2",
            "--max-updates", "300", "--checkpoint-interval", "300", "--no-valid-bleu", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    return model_dir
