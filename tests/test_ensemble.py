"""Ensembles through the one search: a one-member ensemble is the model, members of different architectures."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from adlnmt.cli import main
from adlnmt.data.data_dir import DataDir
from adlnmt.data.prepare import prepare
from adlnmt.errors import UserError
from adlnmt.inference.ensemble import Ensemble, combine, load_ensemble
from adlnmt.inference.search import SearchOptions, translate_ids
from adlnmt.inference.translator import Translator
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.store.names import EXPORT_MANIFEST

ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODERS = {
    "transformer": "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "rnn": "pos -> repeat(1, res_nd(rnn) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
}
OPTIONS = [SearchOptions(beam=1, alignments=True), SearchOptions(beam=4, nbest=3, batch_size=5, alignments=True)]


@pytest.fixture(scope="module")
def model_dirs(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny transformer and RNN-decoder model on the demo corpus (30 updates each)."""
    trained = {}
    for name, decoder in DECODERS.items():
        model_dir = tmp_path_factory.mktemp(f"ensemble-{name}")
        argv = ["train", "--data", str(demo_data / "data"), "--model", str(model_dir), "--encoder", ENCODER,
                "--decoder", decoder, "--d-model", "32", "--heads", "4", "--batch-tokens", "800", "--lr", "5e-3",
                "--max-updates", "30", "--checkpoint-interval", "15", "--no-valid-bleu", "--no-progress"]  # fmt: skip
        assert main(argv) == 0
        trained[name] = model_dir
    return trained


def sources(demo_data: Path, count: int = 14) -> list[str]:
    return (demo_data / "corpus" / "test.src").read_text(encoding="utf-8").splitlines()[:count]


def same_hypotheses(a: list, b: list, exact: bool = True) -> None:
    for hyps_a, hyps_b in zip(a, b, strict=True):
        assert [h.pieces for h in hyps_a] == [h.pieces for h in hyps_b]
        scores_a, scores_b = [h.score for h in hyps_a], [h.score for h in hyps_b]
        assert scores_a == (scores_b if exact else pytest.approx(scores_b, rel=1e-5, abs=1e-4))
        assert [h.alignment for h in hyps_a] == [h.alignment for h in hyps_b] or not exact


@pytest.mark.parametrize("family", list(DECODERS))
def test_a_one_member_ensemble_equals_the_model(model_dirs: dict[str, Path], demo_data: Path, family: str) -> None:
    alone, ensemble = Translator.load(model_dirs[family]), load_ensemble([model_dirs[family]])
    assert ensemble.engine_name == "ensemble"
    for options in OPTIONS:
        same_hypotheses(alone.search(sources(demo_data), options), ensemble.search(sources(demo_data), options))


def test_a_model_twice_searches_like_the_model(model_dirs: dict[str, Path], demo_data: Path) -> None:
    """Log-linear and linear averages of equal distributions are that distribution (up to rounding)."""
    alone = Translator.load(model_dirs["rnn"])
    for combination in ("log-linear", "linear"):
        twice = load_ensemble([model_dirs["rnn"]] * 2, combination=combination)
        for options in OPTIONS:
            same_hypotheses(alone.search(sources(demo_data), options), twice.search(sources(demo_data), options),
                            exact=False)  # fmt: skip


def test_members_of_different_architectures_combine_each_step(model_dirs: dict[str, Path], demo_data: Path) -> None:
    members = [Translator.load(model_dirs[family]).model for family in DECODERS]
    data = DataDir.load(demo_data / "data")
    src = [data.encode_source(line) for line in sources(demo_data, 6)]
    for combination in ("log-linear", "linear"):
        ensemble = Ensemble(members, combination)
        found = translate_ids(ensemble, src, SearchOptions(beam=3, nbest=2))
        assert all(len(hyps) == 2 for hyps in found)
        memory = ensemble.encode(torch.tensor([src[0]]))
        state = ensemble.init_state(memory)
        log_probs, _ = ensemble.next_log_probs(torch.tensor([2]), memory, state, alignments=False)
        expected = combine([stepper.step(torch.tensor([2]))[0] for stepper in ensemble.init_state(memory).steppers],
                           combination)  # fmt: skip
        assert torch.equal(log_probs, expected)
    parts = [torch.log_softmax(torch.randn(3, 9), dim=-1) for _ in range(2)]
    assert torch.allclose(combine(parts, "linear").exp(), (parts[0].exp() + parts[1].exp()) / 2, atol=1e-6)
    assert torch.allclose(combine(parts, "log-linear"), (parts[0] + parts[1]) / 2)


def test_members_need_one_target_vocabulary(demo_data: Path) -> None:
    data = DataDir.load(demo_data / "data")
    small = Seq2Seq(ModelConfig(ENCODER, DECODERS["transformer"], data.src_vocab.size, 40, d_model=16, heads=2))
    large = Seq2Seq(ModelConfig(ENCODER, DECODERS["transformer"], data.src_vocab.size, 50, d_model=16, heads=2))
    with pytest.raises(UserError, match="one target vocabulary"):
        Ensemble([small, large])


def test_members_of_separately_prepared_identical_data_combine(
    model_dirs: dict[str, Path], demo_data: Path, tmp_path: Path
) -> None:
    """The same corpus prepared twice gives sentencepiece files that may differ in their bytes (before 2026-11-30 they
    embedded their path) but not in any id's piece, score or kind: such models ensemble; a model of another vocabulary
    is refused."""
    from sentencepiece import sentencepiece_model_pb2

    corpus = demo_data / "corpus"
    members = {}
    for name, vocab_size in (("twin", 150), ("other", 140)):
        prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt",
                tmp_path / f"data-{name}", vocab_size=vocab_size)  # fmt: skip
        for model in (tmp_path / f"data-{name}").glob("*.model"):  # as written before: the output path inside
            proto = sentencepiece_model_pb2.ModelProto()
            proto.ParseFromString(model.read_bytes())
            proto.trainer_spec.model_prefix = str(model.with_suffix(""))
            model.write_bytes(proto.SerializeToString())
        members[name] = tmp_path / f"model-{name}"
        argv = ["train", "--data", str(tmp_path / f"data-{name}"), "--model", str(members[name]), "--encoder", ENCODER,
                "--decoder", DECODERS["transformer"], "--d-model", "16", "--heads", "2", "--batch-tokens", "400",
                "--max-updates", "2", "--checkpoint-interval", "2", "--no-valid-bleu", "--no-progress"]  # fmt: skip
        assert main(argv) == 0
    first, twin = DataDir.load(demo_data / "data"), DataDir.load(tmp_path / "data-twin")
    assert first.src_vocab.to_bytes() != twin.src_vocab.to_bytes()
    ensemble = load_ensemble([model_dirs["transformer"], members["twin"]])
    assert len(ensemble.translate(sources(demo_data, 3), SearchOptions(beam=2))) == 3
    with pytest.raises(UserError, match=r"its source vocabulary differs from .*'s; ensemble members need"):
        load_ensemble([model_dirs["transformer"], members["other"]])


def test_translate_decodes_an_ensemble(model_dirs: dict[str, Path], demo_data: Path, tmp_path: Path, capsys) -> None:
    source = tmp_path / "in.txt"
    source.write_text("\n".join(sources(demo_data, 5)) + "\n", encoding="utf-8")
    models = [arg for family in DECODERS for arg in ("--model", str(model_dirs[family]))]
    assert main(["translate", *models, "--input", str(source), "--beam", "3", "--combine", "linear"]) == 0
    expected = load_ensemble(list(model_dirs.values()), combination="linear").translate(
        sources(demo_data, 5), SearchOptions(beam=3)
    )
    assert capsys.readouterr().out.splitlines() == expected
    checkpoints = ["--checkpoint", "best", "--checkpoint", "last"]
    assert main(["translate", "--model", str(model_dirs["rnn"]), *checkpoints, "--input", str(source)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 5
    assert main(["translate", *models, "--input", str(source), "--engine", "onnxruntime"]) == 2
    assert "an ensemble runs on the torch engine" in capsys.readouterr().err


def test_an_export_as_an_ensemble_member_is_named(model_dirs: dict[str, Path], tmp_path: Path, capsys) -> None:
    """An ensemble is searched by torch from model directories: an export among them is refused by name."""
    export = tmp_path / "export"
    export.mkdir()
    (export / EXPORT_MANIFEST).write_text("{}\n")
    for members in ([export, model_dirs["rnn"]], [model_dirs["rnn"], export]):
        argv = [arg for member in members for arg in ("--model", str(member))]
        assert main(["translate", *argv, "--input", str(tmp_path / "absent.txt")]) == 2
        err = capsys.readouterr().err
        assert f"{export}: an export directory; an ensemble's members are model directories" in err, err
