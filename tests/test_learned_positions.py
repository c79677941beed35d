"""Hostile input for models with learned positions (issue 69 points 1 and 19): the model's position tables are its
length limits (``Seq2Seq.position_limits``), and every command keeps within them: training refuses data longer
than they cover before the first update and validates within them, the search stops within them, and sources,
prefixes and targets to score are cut to them with a warning naming the line (one length rule)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.inference.translator import Translator

SMALL = [
    "--encoder", "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm",
    "--decoder", "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "--d-model", "32", "--heads", "4", "--batch-tokens", "800", "--threads", "1", "--no-progress",
    "--learned-positions",
]  # fmt: skip
LONG_LINE = " ".join(["The black horse wanted the teacher and"] * 4)  # ~76 pieces of the demo vocabulary


@pytest.fixture(scope="module")
def positions_64(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model with 64 learned positions a side, trained with validation BLEU (the default) at its checkpoint."""
    model = tmp_path_factory.mktemp("positions") / "model"
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(model), *SMALL, "--max-positions", "64",
            "--max-updates", "10", "--checkpoint-interval", "10"]  # fmt: skip
    assert main(argv) == 0  # the greedy validation decode used to run past position 63
    return model


def test_validation_bleu_decodes_within_the_learned_positions(positions_64: Path) -> None:
    record = (positions_64 / "metrics.jsonl").read_text().splitlines()[-1]
    assert '"valid_bleu"' in record


def test_data_longer_than_the_table_is_refused_before_the_first_update(
    demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "model"
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(model), *SMALL, "--max-positions", "8",
            "--max-updates", "10", "--checkpoint-interval", "10"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "sentence" in err and "--max-positions" in err and "Traceback" not in err
    assert not list(model.glob("*.safetensors"))


def test_a_table_written_in_the_adl_is_named_in_the_refusal(
    demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``learn_pos(max_len=8)`` written in the ADL the refusal said only 'raise --max-positions', which does not
    change that table (the same refusal came back); it now names both."""
    encoder = "learn_pos(max_len=8) -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(tmp_path / "model"), *SMALL[4:-1],
            "--encoder", encoder, "--decoder", SMALL[3], "--max-positions", "2048", "--max-updates", "1"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cover 8: raise --max-positions (and any learn_pos(max_len=N) the ADL writes out" in err


def test_the_model_reports_its_true_input_limit(positions_64: Path) -> None:
    translator = Translator.load(positions_64)
    assert translator.max_input_len == 63  # 64 positions, one for EOS (the data allows 250)
    assert translator.max_target_len == 63  # BOS takes a decoder position


def test_translate_cuts_a_long_sentence_and_translates_the_whole_file(
    positions_64: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.txt"
    source.write_text(f"{LONG_LINE}\nThe queen does not wait.\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    argv = ["translate", "--model", str(positions_64), "--input", str(source), "--output", str(out),
            "--prefix", str(source)]  # fmt: skip
    assert main(argv) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2
    err = capsys.readouterr().err
    assert "input line 1:" in err and "truncated to 63" in err
    assert "prefix line 1:" in err


def test_score_pairs_cuts_a_long_target_instead_of_aborting_the_file(
    positions_64: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "src.txt"
    source.write_text(f"{LONG_LINE}\nThe queen does not wait.\n", encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    argv = ["score-pairs", "--model", str(positions_64), "--source", str(source), "--target", str(source),
            "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2
    assert "target line 1:" in capsys.readouterr().err


def test_serve_translates_a_long_sentence_and_reports_the_true_limit(positions_64: Path) -> None:
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    from fastapi.testclient import TestClient

    from adlnmt.serve.app import create_app
    from adlnmt.serve.limits import ServeOptions

    options = ServeOptions(model=str(positions_64), allowed_hosts=("testserver",))
    with TestClient(create_app(options), raise_server_exceptions=False) as client:
        reply = client.post("/translate", json={"text": [LONG_LINE, "The queen does not wait."]})
        assert reply.status_code == 200 and len(reply.json()["translations"]) == 2  # was a 500
        assert client.get("/model").json()["max_input_pieces"] == 63  # was 250


def test_the_length_check_reads_the_manifest_and_opens_shards_only_to_name_a_sentence(
    demo_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start-up independent of corpus size: data within the limits is checked against the manifest's longest
    sentences alone; only data beyond them is scanned, to name the first sentence too long."""
    from types import SimpleNamespace

    from adlnmt.data.data_dir import DataDir
    from adlnmt.errors import UserError
    from adlnmt.train.trainer import check_positions

    data = DataDir.load(demo_data / "data")
    opened = []
    monkeypatch.setattr(DataDir, "open_shard", lambda self, *where, real=DataDir.open_shard: opened.append(where)
                        or real(self, *where))  # fmt: skip
    check_positions(SimpleNamespace(position_limits=lambda: (512, 512)), data)
    assert opened == []
    with pytest.raises(UserError, match=r"train source sentence \d+ needs \d+ positions .* cover 8"):
        check_positions(SimpleNamespace(position_limits=lambda: (8, None)), data)
    assert opened
