"""What the served model can read, checked against the model itself: with learned positions (tables of 128) the
server cuts inputs to what the tables hold, says so in ``/model`` and in warnings, and never answers 500; a device
this machine lacks is one message before anything loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from adlnmt.cli import main
from adlnmt.inference.batching import length_limit
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.translator import Translator
from adlnmt.serve.app import served_limits
from export.conftest import FAMILIES, train_tiny
from serve.server import ClientFactory

TABLE = 128


@pytest.fixture(scope="module")
def learned_positions(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model_dir = tmp_path_factory.mktemp("learned-positions")
    encoder, decoder, extra = FAMILIES["transformer"]
    train_tiny(demo_data / "data", model_dir, encoder, decoder, (*extra, "--learned-positions", "--max-positions",
                                                                 str(TABLE)))  # fmt: skip
    return model_dir


def test_learned_positions_are_served_within_their_tables(
    make_client: ClientFactory, learned_positions: Path, test_lines: list[str]
) -> None:
    translator = Translator.load(learned_positions)
    limit, output = served_limits(translator)
    markers = len(translator.data.source_ids([]))  # EOS, and BOS where sources start with it
    assert 0 < limit <= TABLE - markers  # the encoder's table
    assert length_limit(limit + markers, SearchOptions()) <= output == TABLE - 1  # the longest output fits
    long_line = " ".join(test_lines[:4])
    assert translator.data.src_vocab.encode(long_line).__len__() > limit
    with make_client(translator, model=str(learned_positions)) as client:
        described = client.get("/model").json()
        reply = client.post("/translate", json={"text": [long_line, test_lines[0]], "beam": 3})
        prefix = client.post("/translate", json={"text": [test_lines[0]], "prefix": ["Lo kane " * 80]})
    assert described["max_input_pieces"] == limit
    assert reply.status_code == 200, reply.text
    assert reply.json()["warnings"][0].startswith("input line 1: ") and f"truncated to {limit}" in reply.text
    assert prefix.status_code == 422 and prefix.json()["error"].startswith("invalid request: prefix of line 1: ")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("cuda", "error: --device cuda: CUDA is not available on this machine"),
        ("tpu", "error: --device tpu: unknown device; use cpu, cuda or cuda:N"),
    ],
)
def test_a_device_this_machine_lacks_is_one_message(
    serve_model: Path, device: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--model", str(serve_model), "--device", device]) == 2
    assert capsys.readouterr().err == message + "\n"
