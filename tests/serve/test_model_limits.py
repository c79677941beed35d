"""What the served model can read, checked against the model itself: with learned positions (tables of 128) the
server cuts inputs to what the encoder's table holds, says so in ``/model`` and in warnings, and never answers 500;
a device this machine lacks is one message before anything loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from adlnmt.cli import main
from adlnmt.inference.translator import Translator
from export.conftest import FAMILIES, train_tiny
from serve.server import ClientFactory

TABLE = 128


@pytest.fixture(scope="module")
def learned_positions(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Translator]:
    model_dir = tmp_path_factory.mktemp("learned-positions")
    encoder, decoder, extra = FAMILIES["transformer"]
    train_tiny(demo_data / "data", model_dir, encoder, decoder, (*extra, "--learned-positions", "--max-positions",
                                                                 str(TABLE)))  # fmt: skip
    return model_dir, Translator.load(model_dir)


def test_model_reports_the_input_limit_of_its_learned_positions(
    make_client: ClientFactory, learned_positions: tuple[Path, Translator], test_lines: list[str]
) -> None:
    model_dir, translator = learned_positions
    limit = TABLE - len(translator.data.source_ids([]))  # EOS, and BOS where sources start with it, take positions
    with make_client(translator, model=str(model_dir)) as client:
        described = client.get("/model").json()
    assert described["max_input_pieces"] == limit  # not the data's 250
    too_long = translator.encode_line(" ".join(["ein Hund ."] * 60))  # what the server's search would read
    assert too_long.pieces > limit and len(too_long.ids) == TABLE
    assert translator.input_warning(too_long, 1) == f"input line 1: {too_long.pieces} pieces truncated to {limit}"


def test_learned_positions_are_served_without_a_500(
    make_client: ClientFactory, learned_positions: tuple[Path, Translator], test_lines: list[str]
) -> None:
    model_dir, translator = learned_positions
    long_line = " ".join(test_lines[:6])
    with make_client(translator, model=str(model_dir)) as client:
        replies = [client.post("/translate", json=body) for body in (
            {"text": [long_line, test_lines[0]], "beam": 3},
            {"text": [test_lines[0]], "beam": 2, "prefix": ["Lo kane " * 80]},  # more pieces than the table
        )]  # fmt: skip
    for reply in replies:
        assert reply.status_code == 200, reply.text
        assert all(len(t["pieces"]) < TABLE for t in reply.json()["translations"])
    prefix_pieces = len(translator.data.tgt_vocab.encode("Lo kane " * 80))
    assert prefix_pieces > translator.max_target_len
    assert (
        f"prefix of line 1: {prefix_pieces} pieces truncated to {translator.max_target_len}"
        in (replies[1].json()["warnings"])
    )  # in the response, not only in the server's log


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("device", ["cuda", "tpu"])
def test_a_device_this_machine_lacks_is_one_message(
    serve_model: Path, device: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--model", str(serve_model), "--device", device]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --device ") and device in err and err.count("\n") == 1, err
