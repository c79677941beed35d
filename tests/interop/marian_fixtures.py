"""Tiny random MarianMT directories built offline, as a user's downloaded OPUS-MT checkpoint would look: sentencepiece
models trained on the demo corpus with their own (Marian-style) special ids, a vocab.json in Marian's id order
(``</s>`` 0, ``<unk>`` 1, pieces, ``<pad>`` last), and a ``MarianMTModel`` whose final_logits_bias and LayerNorm
parameters are random (Hugging Face initialises them to 0 and 1, which would hide a swap)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sentencepiece as spm
import torch

SAMPLE = 12  # sentences the tests translate


def train_spm(lines: list[str], prefix: Path, size: int) -> Path:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=str(prefix), vocab_size=size, model_type="unigram",
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, hard_vocab_limit=False, num_threads=1, minloglevel=2,
        character_coverage=1.0,
    )  # fmt: skip
    return prefix.with_name(prefix.name + ".model")


def marian_json(pieces: list[str]) -> dict[str, int]:
    """A Marian vocabulary of ``pieces``: ``</s>`` 0, ``<unk>`` 1, the pieces, ``<pad>`` last."""
    table = {"</s>": 0, "<unk>": 1} | {p: i + 2 for i, p in enumerate(pieces)}
    return table | {"<pad>": len(table)}


def tokenizer(corpus: Path, out: Path, size: int = 60, drop: tuple[str, ...] = (), separate: bool = False,
              codes: tuple[str, ...] = ()) -> dict[str, int]:  # fmt: skip
    """source.spm, target.spm and vocab.json in ``out``; ``drop``: pieces left out of vocab.json (Marian: <unk>);
    ``separate``: vocab.json of the source pieces and target_vocab.json of the target pieces, of one size (as
    Marian's converter requires: the shorter is filled up with pieces segmentation never produces); ``codes``:
    multilingual target-language codes (``>>fra<<``) put first in vocab.json, as in OPUS-MT multi-target models.
    Returns the (source) vocab.json."""
    out.mkdir(parents=True, exist_ok=True)
    sides = {}
    for side, name in (("src", "source"), ("tgt", "target")):
        lines = (corpus / f"train.{side}").read_text(encoding="utf-8").splitlines()[:400]
        model = train_spm(lines, out / f"tmp-{name}", size)
        (out / f"{name}.spm").write_bytes(model.read_bytes())
        model.unlink()
        model.with_suffix(".vocab").unlink()
        processor = spm.SentencePieceProcessor(model_file=str(out / f"{name}.spm"))
        sides[side] = [processor.id_to_piece(i) for i in range(processor.get_piece_size())
                       if not (processor.is_control(i) or processor.is_unknown(i))]  # fmt: skip
    if separate:
        lists = {"src": [*codes, *sides["src"]], "tgt": sides["tgt"]}
        count = max(map(len, lists.values()))
        table, target = (marian_json(pieces + [f"<filler{i}>" for i in range(count - len(pieces))])
                         for pieces in lists.values())  # fmt: skip
        (out / "target_vocab.json").write_text(json.dumps(target), encoding="utf-8")
    else:
        table = marian_json([*codes, *dict.fromkeys(p for p in sides["src"] + sides["tgt"] if p not in drop)])
    (out / "vocab.json").write_text(json.dumps(table), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps({"source_lang": "src", "target_lang": "tgt",
                                                           "separate_vocabs": separate}))  # fmt: skip
    return table


def end_most_outputs(model, sources: list[list[int]]) -> None:
    """Raise the </s> bias of a random model from -8 until most greedy outputs of ``sources`` end after one token
    or more and before 1.5 · |source| + 5 tokens, or else to the bias that ends the most so (a random model
    otherwise tends to repeat one piece to the length limit, or to end at once, which tests little). The sources
    are decoded as one padded batch per bias (one ``generate`` call: the per-call cost dominates a model this
    small)."""
    pad = model.config.pad_token_id
    limits = [int(len(ids) * 1.5) + 5 for ids in sources]
    width = max(map(len, sources))
    batch = torch.tensor([ids + [pad] * (width - len(ids)) for ids in sources])
    mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids in sources])
    best = (-1, 0.0)  # (outputs ended, -bias): the lowest bias that ends the most, when none ends two thirds
    for bias in torch.arange(-8.0, 12.0, 0.5).tolist():
        with torch.no_grad():
            model.final_logits_bias[0, 0] = bias
        outputs = model.generate(batch, attention_mask=mask, do_sample=False, num_beams=1,
                                 max_new_tokens=max(limits) + 1, bad_words_ids=[[pad]])[:, 1:].tolist()  # fmt: skip
        ends = [output.index(0) if 0 in output else None for output in outputs]
        ended = sum(end is not None and 1 <= end < limit for end, limit in zip(ends, limits, strict=True))
        if ended * 3 >= 2 * len(sources):
            return
        best = max(best, (ended, -bias))
    with torch.no_grad():
        model.final_logits_bias[0, 0] = -best[1]


def marian_model(out: Path, vocab_size: int, seed: int = 0, calibrate: list[list[int]] | None = None,
                 **settings: Any):  # fmt: skip
    """A random MarianMTModel saved to ``out``, and loaded back from there (in eval mode)."""
    from transformers import MarianConfig, MarianMTModel

    options = dict(d_model=16, encoder_layers=2, decoder_layers=1, encoder_attention_heads=2,
                   decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=48, activation_function="swish",
                   max_position_embeddings=128, scale_embedding=True, dropout=0.1)  # fmt: skip
    options |= settings
    pad = vocab_size - 1
    config = MarianConfig(vocab_size=vocab_size, decoder_vocab_size=vocab_size, pad_token_id=pad, eos_token_id=0,
                          decoder_start_token_id=pad, forced_eos_token_id=0, **options)  # fmt: skip
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        model.final_logits_bias.copy_(torch.randn(model.final_logits_bias.shape, generator=generator))
        for name, parameter in model.named_parameters():
            if "layer_norm" in name:
                parameter.copy_(
                    torch.randn(parameter.shape, generator=generator) * 0.3 + (1 if "weight" in name else 0)
                )
            elif "embed_tokens" in name or "shared" in name or "lm_head" in name:
                parameter.normal_(0, 0.5, generator=generator)  # HF's 0.02 gives near-uniform outputs
            elif parameter.dim() == 2:
                parameter.normal_(0, 0.3, generator=generator)
            else:
                parameter.normal_(0, 0.1, generator=generator)
        for name in ("shared", "encoder.embed_tokens", "decoder.embed_tokens"):
            if hasattr(model.model, name.split(".")[0]):
                model.get_submodule(f"model.{name}").weight[vocab_size - 1] = 0.0  # the converter's zero start row
    model.save_pretrained(out)
    model = MarianMTModel.from_pretrained(out).eval()  # as a user loads it (positions rebuilt on load)
    if calibrate:  # on the loaded model: before saving, transformers 5 holds other position tables
        end_most_outputs(model, calibrate)
        model.save_pretrained(out)
    return model


def marian_dir(corpus: Path, out: Path, seed: int = 0, drop: tuple[str, ...] = (), separate: bool = False,
               codes: tuple[str, ...] = (), **settings: Any):  # fmt: skip
    """A MarianMT directory (tokenizer: :func:`tokenizer`) whose model ends most greedy outputs of the first valid
    sentences (see :func:`end_most_outputs`)."""
    from transformers import MarianTokenizer

    table = tokenizer(corpus, out, drop=drop, separate=separate, codes=codes)
    sentences = (corpus / "valid.src").read_text(encoding="utf-8").splitlines()[:SAMPLE]
    encode = MarianTokenizer.from_pretrained(out)
    settings = {"share_encoder_decoder_embeddings": False, **settings} if separate else settings
    return marian_model(out, len(table), seed, [encode(text)["input_ids"] for text in sentences], **settings)


def with_source_markers(model: Path, out: Path) -> Path:
    """A copy ``out`` of the model directory ``model`` whose vocabulary manifest says its data was prepared with
    ``--source-markers`` (a BOS before every source), its recorded hash updated to match."""
    import shutil

    from adlnmt.store import names
    from adlnmt.store.atomic import file_sha256

    shutil.copytree(model, out)
    manifest_path = out / names.VOCAB_DIR / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["source_markers"] = manifest["options"]["source_markers"] = True
    manifest_path.write_text(json.dumps(manifest))
    config = json.loads((out / names.CONFIG).read_text())
    config[names.VOCAB_HASHES]["manifest.json"] = file_sha256(manifest_path)
    (out / names.CONFIG).write_text(json.dumps(config))
    return out
