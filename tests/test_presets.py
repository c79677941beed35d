"""Presets: every one builds, decodes incrementally exactly, and trains; the listing and options work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.model import Seq2Seq
from adlnmt.presets import ALIASES, PAPERS, PRESET_GROUPS, PRESETS, get_preset
from adlnmt.train.config import build_config

TINY = {"d_model": 16, "heads": 4, "d_ff": 32}
# One preset of each family trains in CI; the rest are marked slow (same code path, more architectures).
CI_TRAINED = {"transformer-small", "rnmt", "t4-cnn-relu-ff", "comet", "transformer-aan", "student-6-1-ssru"}


def tiny_model(name: str) -> Seq2Seq:
    torch.manual_seed(0)
    config = build_config({"preset": name, **TINY})
    return Seq2Seq(config.model_config(40, 40))


@pytest.mark.parametrize("name", list(PRESETS))
@torch.no_grad()
def test_preset_builds_and_decodes_incrementally_like_the_full_pass(name: str) -> None:
    model = tiny_model(name).eval()
    src = torch.tensor([[5, 6, 7, 8, 9, 3], [4, 5, 6, 3, 0, 0]])
    tgt = torch.tensor([[2, 11, 12, 13, 14], [2, 17, 18, 19, 20]])
    full = model(src, tgt)
    memory = model.encode(src)
    state = model.init_state(memory)
    steps = torch.stack([model.decode_step(tgt[:, t], memory, state) for t in range(tgt.size(1))], dim=1)
    assert torch.allclose(steps, full, atol=1e-5), (steps - full).abs().max()


def trained_presets() -> list:
    return [name if name in CI_TRAINED else pytest.param(name, marks=pytest.mark.slow) for name in PRESETS]


@pytest.mark.parametrize("name", trained_presets())
def test_preset_trains_on_the_demo_corpus(name: str, demo_data: Path, tmp_path: Path) -> None:
    argv = [
        "train",
        "--data",
        str(demo_data / "data"),
        "--model",
        str(tmp_path / "m"),
        "--preset",
        name,
        "--d-model",
        "32",
        "--heads",
        "4",
        "--d-ff",
        "64",
        "--batch-tokens",
        "600",
        "--lr",
        "2e-3",
        "--max-updates",
        "30",
        "--checkpoint-interval",
        "10",
        "--no-valid-bleu",
        "--no-progress",
        "--threads",
        "1",
    ]
    assert main(argv) == 0
    log = [json.loads(line) for line in (tmp_path / "m" / "metrics.jsonl").read_text().splitlines()]
    assert log[-1]["train_loss"] < log[0]["train_loss"], log


def test_every_alias_names_a_preset_and_names_are_unique() -> None:
    assert set(ALIASES).isdisjoint(PRESETS)
    for alias, target in ALIASES.items():
        assert get_preset(alias) is PRESETS[target]
    with pytest.raises(UserError, match="unknown preset 'transformr'"):
        get_preset("transformr")


def test_a_misspelled_preset_gets_a_did_you_mean() -> None:
    with pytest.raises(UserError, match=r"unknown preset 'transfomer-small' \(did you mean 'transformer-small'"):
        get_preset("transfomer-small")
    with pytest.raises(UserError) as caught:
        get_preset("zzz")
    assert "did you mean" not in str(caught.value)


def test_every_paper_table_row_has_a_preset() -> None:
    rows = {
        "t2-upper",
        "t2-increasing",
        "t2-decreasing",
        "t3-rnmt",
        "t3-rnmt-no-input-feeding",
        "t3-transformer",
        "t3-rnn",
        "t3-mh",
        "t3-pos",
        "t3-norm",
        "t3-multi-att-1h",
        "t3-multi-att",
        "t3-ff",
        "t4-cnn-glu",
        "t4-cnn-glu-norm",
        "t4-cnn-glu-mh",
        "t4-cnn-glu-ff",
        "t4-cnn-relu",
        "t4-cnn-relu-norm",
        "t4-cnn-relu-mh",
        "t4-cnn-relu-ff",
        "t5-self-att-self-att",
        "t5-self-att-rnn",
        "t5-self-att-cnn",
        "t5-rnn-self-att",
        "t5-cnn-self-att",
        "t5-rnn-rnn",
        "t5-cnn-cnn",
        "t5-self-att-combined",
        "t5-self-att-none",
        "rnmt",
        "convs2s",
        "transformer",
        "transformer-postnorm",
        "comet",
        "comet-temporal-conv",
        "comet-ffn1",
        "comet-ffn2",
        "comet-4layer",
        "comet-source-markers",
        "comet-transformer",
        "transformer-aan",
        "transformer-aan-noffn",
        "transformer-aan-nogate",
        "cnn-dilated",
    }
    missing = [row for row in rows if row not in PRESETS and row not in ALIASES]
    assert not missing


def test_students_move_depth_from_the_decoder_to_the_encoder() -> None:
    """Every depth × decoder unit, in the teacher's (transformer-postnorm's) blocks: its encoder is the teacher's
    at another depth, its decoder the teacher's with the unit in place of self-attention."""
    from adlnmt.adl.parser import parse
    from adlnmt.adl.syntax import to_text

    teacher = PRESETS["transformer-postnorm"]
    units = {"self-att": "mh_dot_self_att(att_dropout=$DROPOUT)", "aan": "aan", "ssru": "ssru", "rnn": "rnn"}
    for depths in ("12-1", "10-2", "6-1"):
        e, d = depths.split("-")
        for unit, layer in units.items():
            student = PRESETS[f"student-{depths}-{unit}"]
            assert student.encoder == teacher.encoder.replace("repeat(6,", f"repeat({e},")
            decoder = teacher.decoder.replace("repeat(6,", f"repeat({d},")
            assert student.decoder == decoder.replace("mh_dot_self_att(att_dropout=$DROPOUT)", layer)
            assert student.options == teacher.options
            to_text(parse(student.decoder))  # well-formed ADL
    assert PRESET_GROUPS["@students"][-1] == "transformer-postnorm" and len(PRESET_GROUPS["@students"]) == 13


def test_the_benchmark_page_names_every_preset_group() -> None:
    """The groups are used by ``adlnmt bench --preset`` (only there): its page's synopsis names each of them."""
    synopsis = (Path(__file__).parents[1] / "docs" / "benchmarks.md").read_text(encoding="utf-8").split("\n\n")[1]
    assert [group for group in PRESET_GROUPS if group not in synopsis] == []


def test_flags_override_the_preset_size() -> None:
    config = build_config({"preset": "comet"})
    assert (config.d_model, config.heads, config.d_ff) == (256, 8, 2048)
    assert build_config({"preset": "comet", "d_model": 128}).d_model == 128
    assert build_config({"preset": "rnmt"}).input_feeding is True


def test_learned_positions_replace_every_pos() -> None:
    config = build_config({"preset": "transformer", "learned_positions": True, **TINY})
    model_config = config.model_config(40, 40)
    assert model_config.encoder.startswith("learn_pos -> ") and model_config.decoder.startswith("learn_pos -> ")
    assert "pos ->" not in model_config.encoder.replace("learn_pos", "")


def test_architectures_lists_every_preset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["architectures"]) == 0
    out = capsys.readouterr().out
    for name, preset in PRESETS.items():
        line = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert preset.source in line


def test_sources_cite_papers_by_name() -> None:
    for preset in PRESETS.values():
        if preset.name != "transformer-small":  # our benchmark size, from no paper
            assert preset.source.startswith(tuple(f"{citation} " for citation in PAPERS.values())), preset.source


def test_describe_a_preset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "--preset", "transformer-aan"]) == 0
    out = capsys.readouterr().out
    assert "aan" in out.split("\n")[1] and "total" in out
