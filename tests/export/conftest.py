"""Tiny trained models of every decoder family (as in tests/test_search.py) and their exports; tests/bench uses
the Transformer's CTranslate2 export too."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.inference.translator import Translator
from adlnmt.model import ModelConfig, Seq2Seq
from test_search import DECODERS, ENCODER

POST_NORM_ENCODER = "pos -> repeat(2, res_d(mh_dot_self_att) -> norm -> res_d(ffl) -> norm)"
FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {  # name → encoder, decoder, extra train flags
    **{name: (ENCODER, decoder, ()) for name, decoder in DECODERS.items()},
    "post-norm": (
        POST_NORM_ENCODER,
        "pos -> repeat(2, res_d(mh_dot_self_att) -> norm -> res_d(mh_dot_src_att) -> norm -> res_d(ffl) -> norm)",
        ("--tie-output",),
    ),
    "mixed": (
        ENCODER,
        "learn_pos -> repeat(2, res_nd(rnn(cell=gru)) -> res_nd(mlp_src_att(source=increasing)) -> res_nd(cnn) "
        "-> res_nd(aan) -> res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att)) -> norm",
        (),
    ),
    "rnn-input-feeding": (ENCODER, "rnn -> mlp_src_att -> ff(32)", ("--input-feeding",)),
}


LONG_SOURCE = "The king paints the birds and the dog swam because the birds did not sing in three tables ."
SHORT_TABLE_DECODER = ("learn_pos(max_len=12) -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) "
                       "-> res_nd(ffl)) -> norm")  # fmt: skip
SHORT_TABLE_ENCODER = "learn_pos(max_len=12) -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"


def short_table_export(
    data_dir: Path, out: Path, fmt: str, encoder: str = ENCODER, decoder: str = SHORT_TABLE_DECODER
) -> tuple[Seq2Seq, Translator, list[list[int]]]:
    """An untrained model whose learned positions (12) on one side end far below its max_len (1,024), beside
    sinusoidal ones on the other (by default: the decoder's table, a sinusoidal encoder), exported as ``fmt`` into
    ``out``; its translator, bounding each side as PyTorch does, and three sources encoded by it, the first longer
    than the 12 positions."""
    import torch

    from adlnmt.data.data_dir import DataDir
    from adlnmt.export.directory import Source
    from adlnmt.export.formats import export_model
    from adlnmt.store.model_dir import input_limit

    data = DataDir.load(data_dir)
    torch.manual_seed(0)
    config = ModelConfig(encoder, decoder, data.src_vocab.size, data.tgt_vocab.size, d_model=32, heads=4)
    model = Seq2Seq(config)
    export_model(Source(model.eval(), data, input_limit(model, data)), out, fmt, "none")
    translator = Translator.load(out, engine="ctranslate2" if fmt == "ctranslate2" else "onnxruntime")
    assert translator.max_input_len == input_limit(model, data)
    assert translator.max_target_len == (model.max_output_len or config.max_len - 1)
    return model, translator, [translator.encode_line(line).ids for line in [LONG_SOURCE, "The dog .", "A king ."]]


def train_tiny(data: Path, model_dir: Path, encoder: str, decoder: str, extra: tuple[str, ...]) -> None:
    argv = ["train", "--data", str(data), "--model", str(model_dir), "--encoder", encoder, "--decoder", decoder,
            "--d-model", "32", "--heads", "4", "--batch-tokens", "800", "--lr", "3e-3", "--max-updates", "40",
            "--checkpoint-interval", "40", "--no-valid-bleu", "--no-progress", *extra]  # fmt: skip
    assert main(argv) == 0


@pytest.fixture(scope="session")
def tiny_models(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Model directory of every family, trained on first use (40 updates on the demo corpus)."""
    trained: dict[str, Path] = {}

    class Lazy(dict):
        def __missing__(self, family: str) -> Path:
            encoder, decoder, extra = FAMILIES[family]
            model_dir = tmp_path_factory.mktemp(family)
            train_tiny(demo_data / "data", model_dir, encoder, decoder, extra)
            self[family] = model_dir
            return model_dir

    return Lazy(trained)


@pytest.fixture(scope="session")
def ct2_export(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Transformer exported to CTranslate2 (fp32); the ct2 extra must be installed."""
    pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'adlnmt[ct2]'")
    out = tmp_path_factory.mktemp("torch-free") / "ct2"
    assert (
        main(["export", "--model", str(tiny_models["transformer"]), "--format", "ctranslate2", "--out", str(out)]) == 0
    )
    return out


def demo_sources(translator: Translator, demo_data: Path, count: int = 12) -> list[list[int]]:
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:count]
    return [translator.data.encode_source(line) for line in lines]
