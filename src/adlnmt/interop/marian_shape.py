"""MarianMT's architecture as ADL, and the tensors of a model of that shape under their Hugging Face names.

MarianMT (``MarianMTModel``) is a post-norm Transformer: per side ``pos(layout=halves)`` (√d-scaled token embeddings,
unless ``scale_embedding`` is false, plus [sin | cos] sinusoids from position 0), then ``repeat(n, block)`` with

    encoder block: res_d(mh_dot_self_att) -> norm -> res_d(ffl) -> norm
    decoder block: res_d(mh_dot_self_att) -> norm -> res_d(mh_dot_src_att) -> norm -> res_d(ffl) -> norm

and no final norm; the output projection has a bias (``final_logits_bias``). :func:`marian_adl` writes these sentences
from a ``config.json``; :func:`marian_links` matches a built model to the shape (a refusal names the first layer that
has no MarianMT counterpart) and pairs each Hugging Face block tensor with the adlnmt tensor (a view: the fused
query/key/value projections are cut into their parts) that holds it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from adlnmt.errors import UserError
from adlnmt.inference.ctranslate2_shape import children, first_layer, name_of, residual_inner
from adlnmt.layers.base import Layer
from adlnmt.layers.basic import ACTIVATIONS, sinusoid_halves
from adlnmt.model import Seq2Seq

# config.json's activation_function → ffl's act (gelu: the exact erf form; the tanh forms have no ADL counterpart)
ACTIVATION_OF = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
MARIAN_ACTIVATION = {"swish": "swish", "relu": "relu", "gelu": "gelu"}  # ffl's act → config.json (export)
# config.json keys of older exports that describe the shape: each must hold the value MarianMT's shape has
SHAPE_KEYS = {"normalize_before": False, "normalize_embedding": False, "static_position_embeddings": True,
              "add_final_layer_norm": False, "add_bias_logits": False}  # fmt: skip
READ_KEYS = {"d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads",
             "encoder_ffn_dim", "decoder_ffn_dim", "activation_function", "vocab_size", "decoder_vocab_size",
             "share_encoder_decoder_embeddings", "tie_word_embeddings", "max_position_embeddings", "scale_embedding",
             "pad_token_id", "eos_token_id", "decoder_start_token_id", "forced_eos_token_id", "dropout",
             "attention_dropout", "activation_dropout", "model_type", "architectures"}  # fmt: skip
# keys that do not change what the network computes (training, generation and bookkeeping settings)
IGNORED_KEYS = {"_name_or_path", "transformers_version", "torch_dtype", "dtype", "bos_token_id", "init_std",
                "encoder_layerdrop", "decoder_layerdrop", "use_cache", "is_encoder_decoder", "num_hidden_layers",
                "classif_dropout", "classifier_dropout", "gradient_checkpointing", "id2label", "label2id",
                "_num_labels", "num_labels", "num_beams", "max_length", "bad_words_ids", "output_past",
                "extra_pos_embeddings", "is_decoder", "output_attentions", "output_hidden_states",
                "return_dict", "tokenizer_class", "prefix", "task_specific_params"}  # fmt: skip


DROPOUTS = ("dropout", "attention_dropout", "activation_dropout")


@dataclass
class MarianArchitecture:
    """What a MarianMT config.json fixes of the network, checked."""

    d_model: int
    layers: dict[str, int]
    heads: dict[str, int]
    ffn: dict[str, int]
    activation: str
    scale: bool
    dropout: float
    attention_dropout: float
    activation_dropout: float
    max_positions: int
    shared: bool  # share_encoder_decoder_embeddings
    tied: bool  # tie_word_embeddings


def number(config: dict[str, Any], key: str, path: str | Path, kind: type = int, default: Any = None, least: int = 0,
           below: int | None = None) -> Any:  # fmt: skip
    """``config[key]`` (``default`` when absent): an integer (``kind`` float: a finite number) ≥ ``least`` and, with
    ``below``, < ``below``; else the UserError ``path: key: what is wrong``."""
    value = config.get(key, default)
    finite = isinstance(value, int) or (kind is float and isinstance(value, float) and math.isfinite(value))
    if isinstance(value, bool) or not finite or value < least or (below is not None and value >= below):
        wanted = f"in [{least}, {below})" if below is not None else f"≥ {least}"
        got = json_text(value) if key in config else "nothing (missing)"
        raise UserError(f"{path}: {key}: must be {'a number' if kind is float else 'an integer'} {wanted}, got {got}")
    return value


def flag(config: dict[str, Any], key: str, path: str | Path, default: bool) -> bool:
    """``config[key]`` (``default`` when absent), which must be a JSON boolean; else the UserError ``path: key: …``."""
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise UserError(f"{path}: {key}: must be true or false, got {json_text(value)}")
    return value


def read_architecture(config: dict[str, Any], path: str) -> MarianArchitecture:
    """``config`` (a MarianMT config.json, read from ``path``) checked: an unsupported key or value is a UserError
    naming it."""
    if config.get("model_type") != "marian":
        raise UserError(f"{path}: model_type is {config.get('model_type')!r}, not 'marian'")
    for key, value in config.items():
        if key in SHAPE_KEYS and value != SHAPE_KEYS[key]:
            raise UserError(f"{path}: unsupported config key {key} = {value!r} (MarianMT's shape has "
                            f"{json_text(SHAPE_KEYS[key])})")  # fmt: skip
        if key not in SHAPE_KEYS and key not in READ_KEYS and key not in IGNORED_KEYS:
            raise UserError(f"{path}: unsupported config key {key!r}")
    activation = config.get("activation_function", "gelu")
    if activation not in ACTIVATION_OF:
        raise UserError(f"{path}: unsupported activation_function {activation!r} "
                        f"(supported: {', '.join(ACTIVATION_OF)})")  # fmt: skip
    d = number(config, "d_model", path, least=1)
    sides = ("encoder", "decoder")
    layers = {side: number(config, f"{side}_layers", path, least=1) for side in sides}
    heads = {side: number(config, f"{side}_attention_heads", path, least=1) for side in sides}
    ffn = {side: number(config, f"{side}_ffn_dim", path, least=1) for side in sides}
    for side in sides:
        if d % heads[side]:
            raise UserError(f"{path}: {side}_attention_heads: {heads[side]} does not divide d_model {d}")
        if ffn[side] % d:
            raise UserError(f"{path}: {side}_ffn_dim: {ffn[side]} is not a multiple of d_model {d} (ffl's hidden "
                            "width is factor · d)")  # fmt: skip
    rates = {key: float(number(config, key, path, float, 0.1 if key == "dropout" else 0.0, below=1))
             for key in DROPOUTS}  # fmt: skip
    # a position for </s> and one for a piece at least
    max_positions = number(config, "max_position_embeddings", path, int, 1024, least=2)
    scale = flag(config, "scale_embedding", path, False)
    shared = flag(config, "share_encoder_decoder_embeddings", path, True)
    tied = flag(config, "tie_word_embeddings", path, True)
    return MarianArchitecture(d, layers, heads, ffn, ACTIVATION_OF[activation], scale, *rates.values(), max_positions,
                              shared, tied)  # fmt: skip


def json_text(value: Any) -> str:
    return "true" if value is True else "false" if value is False else repr(value)


def marian_adl(arch: MarianArchitecture) -> tuple[str, str, int, int]:
    """Encoder and decoder ADL of ``arch``, with the model options they assume: heads and ffl factor (the
    encoder's; the decoder names its own where they differ)."""
    heads, factor = arch.heads["encoder"], arch.ffn["encoder"] // arch.d_model
    position = "pos(layout=halves" + ("" if arch.scale else ", scale=false") + ")"

    def attention(name: str, side: str) -> str:
        options = [f"heads={arch.heads[side]}"] if arch.heads[side] != heads else []
        options += [f"att_dropout={arch.attention_dropout:g}"] if arch.attention_dropout else []
        return f"res_d({name}({', '.join(options)})) -> norm" if options else f"res_d({name}) -> norm"

    def ffl(side: str) -> str:
        options = [f"factor={arch.ffn[side] // arch.d_model}"] if arch.ffn[side] // arch.d_model != factor else []
        options += [f"act={arch.activation}", f"dropout={arch.activation_dropout:g}"]
        return f"res_d(ffl({', '.join(options)})) -> norm"

    encoder = f"{position} -> repeat({arch.layers['encoder']}, {attention('mh_dot_self_att', 'encoder')} -> " \
              f"{ffl('encoder')})"  # fmt: skip
    decoder = f"{position} -> repeat({arch.layers['decoder']}, {attention('mh_dot_self_att', 'decoder')} -> " \
              f"{attention('mh_dot_src_att', 'decoder')} -> {ffl('decoder')})"  # fmt: skip
    return encoder, decoder, heads, factor


# --- a built model matched to the shape -------------------------------------------------------------------------

SUBLAYERS = {"encoder": ("mh_dot_self_att", "ffl"), "decoder": ("mh_dot_self_att", "mh_dot_src_att", "ffl")}
HF_SUBLAYER = {"mh_dot_self_att": "self_attn", "mh_dot_src_att": "encoder_attn", "ffl": ""}
HF_NORM = {"mh_dot_self_att": "self_attn_layer_norm", "mh_dot_src_att": "encoder_attn_layer_norm",
           "ffl": "final_layer_norm"}  # fmt: skip


@dataclass
class SideMatch:
    """A side of a model matched to MarianMT: its position layer and per block (layer, its norm) pairs."""

    position: Layer
    blocks: list[list[tuple[Layer, nn.LayerNorm]]]


def _refuse(side: str, layer: Layer, expected: str) -> UserError:
    named = first_layer(layer)
    return UserError(f"MarianMT has no counterpart of {side} layer '{named.label or name_of(named)}' "
                     f"(expected {expected})")  # fmt: skip


def _match_block(side: str, repeat: Layer, copy: Layer) -> list[tuple[Layer, nn.LayerNorm]]:
    layers = children(copy)
    pairs = []
    for index, expected in enumerate(SUBLAYERS[side]):
        wrapper = layers[2 * index] if 2 * index < len(layers) else (layers[-1] if layers else repeat)
        inner = residual_inner(wrapper) if name_of(wrapper) in ("res", "res_d") else None
        if inner is None or name_of(inner) != expected:
            raise _refuse(side, inner or wrapper, f"res_d({expected}) -> norm")
        norm = layers[2 * index + 1] if 2 * index + 1 < len(layers) else wrapper
        if name_of(norm) != "norm" or not math.isclose(norm.norm.eps, 1e-5):
            raise _refuse(side, norm, f"norm (eps 1e-5) after {wrapper.label}")
        if name_of(inner) != "ffl":
            default = 1.0 / math.sqrt(inner.out_dim // inner.heads)
            if not math.isclose(inner.scale, default) or getattr(inner, "block", None):
                raise _refuse(side, inner, "the default scale and source=top")
        elif ffl_activation(inner) not in MARIAN_ACTIVATION:
            raise _refuse(side, inner, f"ffl with act {', '.join(MARIAN_ACTIVATION)}")
        pairs.append((inner, norm.norm))
    if len(layers) > 2 * len(SUBLAYERS[side]):
        raise _refuse(side, layers[2 * len(SUBLAYERS[side])], "the end of the block")
    return pairs


def ffl_activation(ffl: Layer) -> str:
    return next((name for name, function in ACTIVATIONS.items() if function is ffl.net.act), "?")


def match_side(model: Seq2Seq, side: str) -> SideMatch:
    """A side matched to MarianMT's, or the UserError naming its first layer without a MarianMT counterpart."""
    chain = getattr(model, side)
    layers = children(chain)
    if not layers or name_of(layers[0]) != "pos" or layers[0].table_of is not sinusoid_halves:
        raise _refuse(side, layers[0] if layers else chain, "pos(layout=halves) first")
    if len(layers) < 2 or name_of(layers[1]) != "repeat":
        raise _refuse(side, layers[1] if len(layers) > 1 else layers[0], "repeat(n, block) after pos")
    match = SideMatch(layers[0], [_match_block(side, layers[1], copy) for copy in children(layers[1])])
    if len(layers) > 2:
        raise _refuse(side, layers[2], "nothing after the blocks (MarianMT has no final norm)")
    return match


def match_model(model: Seq2Seq) -> tuple[SideMatch, SideMatch]:
    if model.config.input_feeding:
        raise UserError("MarianMT has no counterpart of input feeding")
    encoder, decoder = match_side(model, "encoder"), match_side(model, "decoder")
    if encoder.position.scale != decoder.position.scale:
        raise _refuse("decoder", decoder.position, "the encoder's embedding scaling (MarianMT has one scale_embedding)")
    return encoder, decoder


def _layer_links(prefix: str, layer: Layer, norm: nn.LayerNorm, d: int) -> dict[str, Tensor]:
    name = name_of(layer)
    links: dict[str, Tensor] = {}
    if name == "ffl":
        parts = {"fc1": layer.net.up, "fc2": layer.net.down}
    else:
        fused = (
            layer.qkv.weight.split(d), layer.qkv.bias.split(d)
        ) if name == "mh_dot_self_att" else (
            (layer.query.weight, *layer.kv.weight.split(d)), (layer.query.bias, *layer.kv.bias.split(d))
        )  # fmt: skip
        sub = HF_SUBLAYER[name]
        for index, projection in enumerate("qkv"):
            links[f"{prefix}.{sub}.{projection}_proj.weight"] = fused[0][index]
            links[f"{prefix}.{sub}.{projection}_proj.bias"] = fused[1][index]
        parts = {f"{sub}.out_proj": layer.out}
    for part, linear in parts.items():
        links[f"{prefix}.{part}.weight"] = linear.weight
        links[f"{prefix}.{part}.bias"] = linear.bias
    links[f"{prefix}.{HF_NORM[name]}.weight"] = norm.weight
    links[f"{prefix}.{HF_NORM[name]}.bias"] = norm.bias
    return links


def marian_links(model: Seq2Seq) -> dict[str, Tensor]:
    """Every block tensor of MarianMT (``model.{encoder,decoder}.layers.N.…``) → the adlnmt tensor holding it (a view
    for the fused projections); embeddings and the output layer are the caller's (their rows are renumbered)."""
    links: dict[str, Tensor] = {}
    for side, match in zip(("encoder", "decoder"), match_model(model), strict=True):
        for index, block in enumerate(match.blocks):
            for layer, norm in block:
                links |= _layer_links(f"model.{side}.layers.{index}", layer, norm, model.config.d_model)
    return links
