"""A small prepared demo corpus shared by the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlnmt.data.demo import write_demo_corpus
from adlnmt.data.prepare import prepare

TINY_MODEL = [
    "--encoder", "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm",
    "--decoder", "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "--d-model", "32", "--heads", "4", "--batch-tokens", "600", "--threads", "1", "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    write_demo_corpus(root / "corpus", size=1200, seed=3)
    corpus = root / "corpus"
    prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt", root / "data",
            vocab_size=150)  # fmt: skip
    return root
