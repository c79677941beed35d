"""``adlnmt export --format hf-marian``: a model of MarianMT's shape (:mod:`adlnmt.interop.marian_shape`) as a
Hugging Face MarianMT directory that ``MarianMTModel.from_pretrained`` and ``MarianTokenizer.from_pretrained`` load.

Written: ``model.safetensors`` (tied tensors once, as ``transformers`` 5 saves them), ``config.json``,
``generation_config.json`` (pad barred with ``bad_words_ids``), ``vocab.json`` (Marian's id order:
:func:`adlnmt.interop.marian_vocab.marian_table`; with separate source and target vocabularies the source's, and
``target_vocab.json`` with ``separate_vocabs`` in ``tokenizer_config.json``), ``source.spm``/``target.spm`` (the
model's own sentencepiece models: MarianTokenizer looks their pieces up in vocab.json) and ``tokenizer_config.json``.
Any other architecture is refused with the first layer that has no MarianMT counterpart, and so are source markers
(MarianMT's sources have no BOS) and ``--quantize`` (the weights are float32); nothing is written then.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from adlnmt.data.data_dir import DataDir
from adlnmt.errors import UserError
from adlnmt.interop.marian_shape import MARIAN_ACTIVATION, SideMatch, ffl_activation, marian_links, match_model
from adlnmt.interop.marian_vocab import NEVER_PREDICTED, TARGET_VOCAB, marian_table, select_rows
from adlnmt.interop.staging import check_new_directory, write_new_directory
from adlnmt.model import Seq2Seq
from adlnmt.store import ModelDir

MAX_LENGTH = 512  # generation_config.json's max_length (OPUS-MT's; the start token included)
WHAT = "the export"  # in messages about --out


def _uniform(values: list[int], what: str, side: str) -> int:
    if len(set(values)) != 1:
        raise UserError(f"MarianMT has one {what} per side; the {side} has {sorted(set(values))}")
    return values[0]


def marian_config(model: Seq2Seq, sides: tuple[SideMatch, SideMatch], vocab_size: int) -> dict[str, Any]:
    """config.json of ``model`` (matched to ``sides``) with ``vocab_size`` Marian ids."""
    settings: dict[str, Any] = {}
    activations = set()
    for side, match in zip(("encoder", "decoder"), sides, strict=True):
        layers = [layer for block in match.blocks for layer, _ in block]
        attentions = [layer for layer in layers if hasattr(layer, "heads")]
        ffls = [layer for layer in layers if not hasattr(layer, "heads")]
        settings[f"{side}_layers"] = len(match.blocks)
        settings[f"{side}_attention_heads"] = _uniform([layer.heads for layer in attentions], "head count", side)
        settings[f"{side}_ffn_dim"] = _uniform([layer.net.up.out_features for layer in ffls], "FFN width", side)
        activations |= {ffl_activation(layer) for layer in ffls}
    if len(activations) != 1:
        raise UserError(f"MarianMT has one activation_function; this model has {sorted(activations)}")
    pad = vocab_size - 1
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "d_model": model.config.d_model,
        **settings,
        "activation_function": MARIAN_ACTIVATION[activations.pop()],
        "vocab_size": vocab_size,
        "decoder_vocab_size": vocab_size,
        "share_encoder_decoder_embeddings": model.config.tie_source,
        "tie_word_embeddings": model.config.tie_output,
        "max_position_embeddings": model.config.max_len,
        "scale_embedding": sides[0].position.scale != 1.0,
        "pad_token_id": pad,
        "eos_token_id": 0,
        "decoder_start_token_id": pad,
        "forced_eos_token_id": 0,
        "dropout": model.config.dropout,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "is_encoder_decoder": True,
    }


def marian_tables(data: DataDir, tie_source: bool) -> dict[str, tuple[dict[str, int], list[int | None]]]:
    """Per side the Marian table and row order (:func:`marian_table`): one table for both sides when they list the
    same pieces (a joint vocabulary, or one import's), else one per side of equal size (separate vocabularies)."""
    pieces = {side: vocab.pieces(list(range(vocab.size))) for side, vocab in (("src", data.src_vocab),
                                                                              ("tgt", data.tgt_vocab))}  # fmt: skip
    if pieces["src"] == pieces["tgt"]:
        table = marian_table(pieces["src"])
        return {"src": table, "tgt": table}
    if tie_source:
        raise UserError("this model ties its source embeddings to the target's, but its source and target "
                        "vocabularies differ: MarianMT cannot share one embedding table between them")  # fmt: skip
    size = max(len(side) - 1 for side in pieces.values())
    return {side: marian_table(side_pieces, size) for side, side_pieces in pieces.items()}


@torch.no_grad()
def marian_tensors(model: Seq2Seq, orders: dict[str, list[int | None]], config: dict[str, Any]) -> dict[str, Tensor]:
    """The safetensors content: block tensors by name, embeddings and output rows in each side's Marian id order."""
    tensors = {name: view.detach().clone().contiguous() for name, view in marian_links(model).items()}
    source, target = select_rows(model.src_embed.weight, orders["src"]), select_rows(model.tgt_embed.weight,
                                                                                      orders["tgt"])  # fmt: skip
    shared, tied = config["share_encoder_decoder_embeddings"], config["tie_word_embeddings"]
    if shared and tied:  # transformers 5 ties shared, both embed_tokens and lm_head: stored once
        tensors["model.shared.weight"] = target
    else:
        tensors["model.encoder.embed_tokens.weight"] = source
        tensors["model.decoder.embed_tokens.weight"] = target
        if shared:
            tensors["model.shared.weight"] = source.clone()  # untied by tie_word_embeddings=false, kept, unread
        if not tied:
            tensors["lm_head.weight"] = select_rows(model.output.weight, orders["tgt"])
    tensors["final_logits_bias"] = select_rows(model.output.bias, orders["tgt"], NEVER_PREDICTED).unsqueeze(0)
    return tensors


def marian_writer(model: Seq2Seq, data: DataDir) -> Callable[[Path], None]:
    """What writes ``model`` (with its vocabularies ``data``) as MarianMT files into a directory; a UserError now
    when the model has no MarianMT counterpart."""
    from safetensors.torch import save_file

    if data.source_markers:
        raise UserError("MarianMT has no counterpart of source markers (the data was prepared with --source-markers: "
                        "a BOS before every source, which MarianMT's sources never have)")  # fmt: skip
    sides = match_model(model.eval())
    tables = marian_tables(data, model.config.tie_source)
    separate = tables["src"] is not tables["tgt"]
    size = len(tables["src"][0])
    config = marian_config(model, sides, size)
    tensors = marian_tensors(model, {side: order for side, (_, order) in tables.items()}, config)
    pad = size - 1
    generation = {"decoder_start_token_id": pad, "eos_token_id": 0, "forced_eos_token_id": 0, "pad_token_id": pad,
                  "bad_words_ids": [[pad]], "num_beams": 5, "max_length": MAX_LENGTH}  # fmt: skip
    tokenizer = {"tokenizer_class": "MarianTokenizer", "separate_vocabs": separate, "model_max_length": MAX_LENGTH,
                 "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}  # fmt: skip
    files = {"config.json": config, "generation_config.json": generation, "vocab.json": tables["src"][0],
             "tokenizer_config.json": tokenizer}  # fmt: skip
    if separate:
        files[TARGET_VOCAB] = tables["tgt"][0]

    def fill(directory: Path) -> None:
        save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
        for name, content in files.items():
            (directory / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (directory / "source.spm").write_bytes(data.src_vocab.to_bytes())
        (directory / "target.spm").write_bytes(data.tgt_vocab.to_bytes())

    return fill


def export_marian(model_dir: str | Path, out: str | Path, checkpoint: str = "best", quantize: str = "none") -> None:
    """Write the model in ``model_dir`` (``checkpoint``) as the new MarianMT directory ``out`` (float32 weights:
    ``quantize`` other than none is refused)."""
    if quantize != "none":
        raise UserError(f"--quantize {quantize} with --format hf-marian: MarianMT exports are fp32; leave out "
                        "--quantize (or export --format onnx or ctranslate2 to quantize)")  # fmt: skip
    check_new_directory(Path(out), WHAT, Path(model_dir))
    model, data, _ = ModelDir(model_dir).load_model(checkpoint)
    write_new_directory(Path(out), marian_writer(model, data), WHAT)
