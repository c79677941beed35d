"""Test-wide settings (one intra-op thread: tiny tensors, and no 2-thread stalls on busy CI cores; a registry of
training workers of the tests' own, so that their timed decoding never stops real training on the machine) and a
small prepared demo corpus shared by the tests that train."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from adlnmt.data.demo import write_demo_corpus
from adlnmt.data.prepare import prepare
from adlnmt.experiment.quiet import REGISTRY

torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def own_training_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:  # os.environ: the tests' worker processes inherit it
        patch.setenv(REGISTRY, str(tmp_path_factory.mktemp("machine") / "training"))
        yield


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    write_demo_corpus(root / "corpus", size=1200, seed=3)
    corpus = root / "corpus"
    prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt", root / "data",
            vocab_size=150)  # fmt: skip
    return root
