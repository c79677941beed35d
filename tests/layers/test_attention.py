"""Attention layers: the layer contract, known values, source block selection, caching and errors."""

from __future__ import annotations

import math
from contextlib import nullcontext

import pytest
import torch
from torch import Tensor, nn

from adlnmt.adl.errors import ADLError
from adlnmt.adl.registry import ALIASES, REGISTRY, Side
from adlnmt.layers.attention import (
    MhDotSelfAtt,
    MhDotSrcAtt,
    MlpSrcAtt,
    SourceAttention,
    fused_attention,
    masked_softmax,
    nonempty_rows,
)
from adlnmt.layers.base import Context, DecoderState, SourceMemory
from adlnmt.layers.builder import build_chain, canonical
from adlnmt.layers.context import BlockInfo, ModelOptions
from adlnmt.speedups import speedups_off
from layer_contract import Setup, build, check_contract, init, lengths_mask, make_memory, run_steps

SIDES = (Side.ENCODER, Side.DECODER)
D = 16


def first(layer: nn.Module, kind: type) -> nn.Module:
    """The first sub-module of ``layer`` (itself included) that is a ``kind``."""
    return next(m for m in layer.modules() if isinstance(m, kind))


def decoder(adl: str, d: int = 2, d_src: int | None = None, encoder: BlockInfo | None = None) -> nn.Module:
    return build_chain(
        adl,
        Side.DECODER,
        d,
        ModelOptions(d_model=d, heads=1, dropout=0.0),
        encoder=encoder,
        encoder_width=d if d_src is None else d_src,
    )


def set_identity(att: nn.Module) -> None:
    """Every projection of a one-head dot attention becomes the identity (fused ones stacked)."""
    with torch.no_grad():
        for linear in (m for m in att.modules() if isinstance(m, nn.Linear)):
            rows, cols = linear.weight.shape
            linear.weight.copy_(torch.eye(cols).repeat(rows // cols, 1))
            linear.bias.zero_()


# -------------------------------------------------------------------------------------------- contract


@pytest.mark.parametrize("side", SIDES, ids=lambda s: s.value)
@pytest.mark.parametrize(
    "adl",
    [
        "mh_dot_self_att",
        "mh_dot_self_att(heads=1)",
        "mh_dot_self_att(heads=4, s=1.0)",
        "dot_self_att",
        "dot_self_att(s=1.0)",
        "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm",
    ],
)
def test_self_attention_contract(adl: str, side: Side) -> None:
    check_contract(adl, side)


@pytest.mark.parametrize(
    "adl",
    [
        "mh_dot_src_att",
        "mh_dot_att(heads=1)",
        "mh_dot_src_att(heads=4, s=1.0)",
        "dot_src_att",
        "dot_src_att(s=1.0)",
        "repeat(3, res(mh_dot_src_att(source=increasing)))",
        "repeat(3, res(mh_dot_att(heads=2, source=decreasing)))",
        "repeat(3, res(dot_src_att(source=increasing)))",
        "concat(id, mlp_att) -> ff",
        "mlp_src_att(d=8)",
        "repeat(3, res(mlp_att(source=decreasing)))",
        "pos -> repeat(3, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    ],
)
def test_source_attention_contract(adl: str) -> None:
    check_contract(adl, Side.DECODER)


@pytest.mark.parametrize(
    "adl",
    ["mh_dot_src_att", "repeat(3, res(dot_src_att(source=increasing)))", "concat(id, mlp_att) -> ff"],
)
def test_source_attention_contract_other_source_width(adl: str) -> None:
    setup = check_contract(adl, Side.DECODER, d_src=12)
    mlp = [m for m in setup.layer.modules() if isinstance(m, MlpSrcAtt)]
    assert all(m.out_dim == 12 for m in mlp)  # values are the source states themselves


def test_widths() -> None:
    assert build("mh_dot_self_att", Side.ENCODER, d=24, heads=6).layer.out_dim == 24
    assert build("mh_dot_src_att", Side.DECODER, d=24, heads=6, d_src=10).layer.out_dim == 24
    assert build("mlp_att", Side.DECODER, d=24, d_src=10).layer.out_dim == 10
    assert build("concat(id, mlp_att)", Side.DECODER, d=24, d_src=10).layer.out_dim == 34


def test_registry_names_and_aliases() -> None:
    assert ALIASES["mh_dot_att"] == "mh_dot_src_att"
    assert ALIASES["mlp_att"] == "mlp_src_att"
    for name in ("mh_dot_src_att", "dot_src_att", "mlp_src_att"):
        spec = REGISTRY[name]
        assert spec.sides == frozenset({Side.DECODER}) and spec.source_attention
    for name in ("mh_dot_self_att", "dot_self_att"):
        assert REGISTRY[name].sides == frozenset(SIDES) and not REGISTRY[name].source_attention
    for name in ("mh_dot_self_att", "dot_self_att", "mh_dot_src_att", "dot_src_att", "mlp_src_att"):
        assert REGISTRY[name].summary.startswith(f"{name}(")
    assert canonical("mh_dot_att(2, source=increasing)") == "mh_dot_src_att(heads=2, source=increasing)"


# ------------------------------------------------------------------------------------- known values


def test_dot_self_attention_known_values() -> None:
    """Identity projections, x = [e_1, e_2]: out_i = Σ_j softmax_j(x_i·x_j / √s) x_j by hand."""
    e = math.e
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    encoder = build_chain("dot_self_att(s=1.0)", Side.ENCODER, 2, ModelOptions(d_model=2, heads=1))
    set_identity(encoder)
    expected = torch.tensor([[[e, 1.0], [1.0, e]]]) / (e + 1)
    assert torch.allclose(encoder(x, Context()), expected, atol=1e-6)
    # The second position is padding: nobody attends to it.
    padded = encoder(x, Context(mask=torch.tensor([[True, False]])))
    assert torch.allclose(padded, torch.tensor([[[1.0, 0.0], [1.0, 0.0]]]), atol=1e-6)
    # Decoder: position 0 sees only itself.
    dec = decoder("dot_self_att(s=1.0)")
    set_identity(dec)
    expected = torch.tensor([[[1.0, 0.0], [1 / (1 + e), e / (1 + e)]]])
    assert torch.allclose(dec(x, Context()), expected, atol=1e-6)
    # Default scale: s = d = 2 (one head).
    default = build_chain("dot_self_att", Side.ENCODER, 2, ModelOptions(d_model=2, heads=1))
    set_identity(default)
    a = math.exp(2**-0.5) / (math.exp(2**-0.5) + 1)
    expected = torch.tensor([[[a, 1 - a], [1 - a, a]]])
    assert torch.allclose(default(x, Context()), expected, atol=1e-6)


def test_dot_source_attention_known_values() -> None:
    """Query e_1 over U = [(2, 0), (0, 1), padding]: weights (e², 1, 0) / (e² + 1), s = 1."""
    e2 = math.exp(2.0)
    layer = decoder("dot_src_att(s=1.0)")
    set_identity(layer)
    states = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [5.0, 5.0]]])
    memory = SourceMemory(states, torch.tensor([[True, True, False]]))
    attention: list[Tensor] = []
    out = layer(torch.tensor([[[1.0, 0.0]]]), Context(memory=memory, attention=attention))
    weights = torch.tensor([e2, 1.0, 0.0]) / (e2 + 1)
    assert torch.allclose(out, torch.tensor([[[2 * weights[0], weights[1]]]]), atol=1e-6)
    assert torch.allclose(attention[0], weights.view(1, 1, 1, 3), atol=1e-6)


def test_mh_attention_matches_torch_multihead_attention() -> None:
    """Fused projections, head split and default scale √(d/h) agree with nn.MultiheadAttention."""
    torch.manual_seed(0)
    x = torch.randn(3, 6, D)
    mask = lengths_mask([6, 4, 2], 6)
    reference = nn.MultiheadAttention(D, 4, batch_first=True).eval()
    for side in SIDES:
        layer = build("mh_dot_self_att", side, heads=4).layer.eval()
        att = first(layer, MhDotSelfAtt)
        with torch.no_grad():
            reference.in_proj_weight.copy_(att.qkv.weight)
            reference.in_proj_bias.copy_(att.qkv.bias)
            reference.out_proj.weight.copy_(att.out.weight)
            reference.out_proj.bias.copy_(att.out.bias)
        causal = torch.ones(6, 6, dtype=torch.bool).triu(1) if side is Side.DECODER else None
        expected, _ = reference(x, x, x, key_padding_mask=~mask, attn_mask=causal, need_weights=False)
        out = layer(x, Context(mask=mask))
        assert torch.allclose(out[mask], expected[mask], atol=1e-5), side


def test_mlp_attention_known_values() -> None:
    """S_ij = w_oᵀ tanh(W_q h_i + W_k u_j + b) against a loop; zero weights give the mean of real U."""
    torch.manual_seed(0)
    setup = build("mlp_att(d=5)", Side.DECODER, d=4, d_src=3)
    att = first(setup.layer, MlpSrcAtt)
    memory = make_memory(setup, 3)  # source lengths 7, 6, 5
    h = torch.randn(3, 2, 4)
    out = setup.layer(h, Context(memory=memory))
    for b in range(3):
        real = memory.final[b, memory.mask[b]]  # [S_b, 3]
        for i in range(2):
            scores = torch.stack(
                [att.score.weight[0] @ torch.tanh(att.query.weight @ h[b, i] + att.key(u)) for u in real]
            )
            assert torch.allclose(out[b, i], torch.softmax(scores, 0) @ real, atol=1e-5)
    with torch.no_grad():
        att.query.weight.zero_()
        att.key.weight.zero_()
    out = setup.layer(h, Context(memory=memory))
    for b in range(3):
        mean = memory.final[b, memory.mask[b]].mean(0)
        assert torch.allclose(out[b], mean.expand(2, 3), atol=1e-6)


# ------------------------------------------------------------------------------------ source blocks


@pytest.mark.parametrize("name", ["mh_dot_src_att", "mlp_att"])
@pytest.mark.parametrize(
    ("source", "expected"),
    [("top", [None, None, None]), ("increasing", [0, 1, 2]), ("decreasing", [2, 1, 0])],
)
def test_source_reads_the_expected_encoder_block(name: str, source: str, expected: list[int | None]) -> None:
    torch.manual_seed(0)
    setup = build(f"repeat(3, res({name}(source={source})))", Side.DECODER)
    setup.layer.eval()
    memory = make_memory(setup, 2)
    x = torch.randn(2, 4, D)
    attentions = [m for m in setup.layer.modules() if isinstance(m, SourceAttention)]
    assert len(attentions) == 3
    for block, att in enumerate(attentions):
        reference = att(x, Context(memory=memory))
        for perturbed in (None, 0, 1, 2):  # None = the encoder's final output
            other = SourceMemory(
                memory.final + torch.randn_like(memory.final) * (perturbed is None),
                memory.mask,
                [b + torch.randn_like(b) * (i == perturbed) for i, b in enumerate(memory.blocks)],
            )
            changed = not torch.allclose(att(x, Context(memory=other)), reference)
            assert changed == (perturbed == expected[block]), (block, perturbed)


@pytest.mark.parametrize(("source", "order"), [("increasing", [0, 1, 2]), ("decreasing", [2, 1, 0])])
def test_source_width_follows_the_encoder_block(source: str, order: list[int]) -> None:
    widths = [8, 12, 20]
    layer = decoder(
        f"repeat(3, res(mh_dot_src_att(source={source})) -> concat(id, mlp_att(source={source})) -> linear(16))",
        d=16,
        encoder=BlockInfo(3, widths),
    )
    dots = [m for m in layer.modules() if type(m) is MhDotSrcAtt]
    mlps = [m for m in layer.modules() if isinstance(m, MlpSrcAtt)]
    assert [m.kv.in_features for m in dots] == [widths[i] for i in order]
    assert [m.out_dim for m in mlps] == [widths[i] for i in order]


# ------------------------------------------------------------------------------------ incremental


@pytest.mark.parametrize(
    ("adl", "kind", "projection", "static"),
    [
        ("res(mh_dot_src_att)", MhDotSrcAtt, "kv", ("k", "v")),
        ("concat(id, mlp_att) -> ff", MlpSrcAtt, "key", ("keys",)),
    ],
)
def test_source_is_projected_once_per_sentence(adl: str, kind: type, projection: str, static: tuple[str, ...]) -> None:
    setup = build(f"res(mh_dot_self_att) -> {adl}", Side.DECODER)
    setup.layer.eval()
    att = first(setup.layer, kind)
    calls: list[int] = []
    getattr(att, projection).register_forward_hook(lambda module, args, output: calls.append(1))
    memory = make_memory(setup, 2)
    # The layer's own init_state projects the source and keeps it as static state ...
    state = DecoderState(2)
    att.init_state(Context(memory=memory, state=state))
    assert calls == [1]
    assert all((id(att), name) in state.static for name in static)
    # ... and a whole decode through the chain projects it once in all.
    calls.clear()
    ctx = init(setup, memory)
    with torch.no_grad():
        run_steps(setup, torch.randn(2, 5, D), ctx, 0)
    assert calls == [1], "the source was projected again during the steps"


@pytest.mark.parametrize("preallocate", [True, False])
def test_self_attention_cache_grows_and_stays_differentiable(preallocate: bool) -> None:
    setup = build("res(mh_dot_self_att) -> res(mh_dot_src_att)", Side.DECODER, heads=4)
    setup.layer.eval()
    att = first(setup.layer, MhDotSelfAtt)
    x = torch.randn(2, 40, D, requires_grad=True)  # past the first buffer's 16 positions: it grows
    with nullcontext() if preallocate else speedups_off("preallocate"):
        ctx = init(setup, make_memory(setup, 2))
        out = run_steps(setup, x, ctx, 0)
        with torch.no_grad():
            expected = run_steps(setup, x, init(setup, ctx.memory), 0)
    cache = ctx.state.growing[(id(att), "k")]
    assert cache.view.shape == (2, 4, 40, D // 4)  # [B, h, t, d_h]
    assert not cache.preallocated  # autograd needs the concatenating cache
    torch.testing.assert_close(out, expected)  # without autograd: preallocated when switched on
    out.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert x.grad[:, 0].abs().sum() > 0  # the first position reaches later steps through the cache
    assert att.qkv.weight.grad is not None and att.qkv.weight.grad.abs().sum() > 0


def test_multi_position_step_equals_full_pass() -> None:
    """A step may feed several positions at once (a forced prefix): causal within them."""
    torch.manual_seed(0)
    setup = build("res(mh_dot_self_att) -> res(mh_dot_src_att)", Side.DECODER)
    setup.layer.eval()
    memory = make_memory(setup, 2)
    x = torch.randn(2, 6, D)
    reference = setup.layer(x, Context(memory=memory))
    ctx = init(setup, memory)
    first_part = setup.layer.step(x[:, :4], ctx)
    ctx.offset = 4
    second_part = setup.layer.step(x[:, 4:], ctx)
    assert torch.allclose(torch.cat([first_part, second_part], 1), reference, atol=1e-5)


# -------------------------------------------------------------------------------------- alignments


@pytest.mark.parametrize(("adl", "heads"), [("mh_dot_src_att", 4), ("dot_src_att", 1), ("mlp_att", 1)])
def test_alignment_probabilities(adl: str, heads: int) -> None:
    torch.manual_seed(0)
    setup = build(adl, Side.DECODER, heads=4)
    setup.layer.eval()
    memory = make_memory(setup, 3)  # source lengths 7, 6, 5
    x = torch.randn(3, 4, D)
    attention: list[Tensor] = []
    out = setup.layer(x, Context(memory=memory, attention=attention))
    assert len(attention) == 1
    probs = attention[0]
    assert probs.shape == (3, heads, 4, 7)
    assert torch.allclose(probs.sum(-1), torch.ones(3, heads, 4), atol=1e-6)
    assert (probs.masked_select(~memory.mask[:, None, None, :]) == 0).all()
    assert (probs.masked_select(memory.mask[:, None, None, :]) > 0).all()
    # The explicit path computes what the fused one does.
    assert torch.allclose(out, setup.layer(x, Context(memory=memory)), atol=1e-5)
    # Incremental: one [B, h, 1, S] per step.
    ctx = init(setup, memory)
    ctx.attention = []
    with torch.no_grad():
        run_steps(setup, x, ctx, 0)
    assert [p.shape for p in ctx.attention] == [(3, heads, 1, 7)] * 4
    assert torch.allclose(torch.cat(ctx.attention, 2), probs, atol=1e-5)


def test_self_attention_reports_no_alignments() -> None:
    setup = build("mh_dot_self_att", Side.DECODER)
    attention: list[Tensor] = []
    setup.layer(torch.randn(2, 3, D), Context(memory=make_memory(setup, 2), attention=attention))
    assert attention == []


# ------------------------------------------------------------------------------------------ no NaN


@pytest.mark.parametrize("alignments", [False, True])
def test_empty_sentences_give_no_nan(alignments: bool) -> None:
    """A target or source sentence with no real position at all must not poison anything."""
    torch.manual_seed(0)
    adl = "res(mh_dot_self_att) -> res(mh_dot_src_att) -> concat(id, mlp_att) -> ff"
    setup: Setup = build(adl, Side.DECODER)
    memory = make_memory(setup, 3)
    memory.mask[1] = False
    x = torch.randn(3, 5, D, requires_grad=True)
    mask = lengths_mask([5, 3, 0], 5)
    attention: list[Tensor] | None = [] if alignments else None
    out = setup.layer(x, Context(mask=mask, memory=memory, attention=attention))
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in setup.layer.parameters() if p.grad is not None)
    if attention is not None:
        assert all((p[1] == 0).all() and torch.isfinite(p).all() for p in attention)
    encoder = build("res(mh_dot_self_att) -> res(dot_self_att)", Side.ENCODER).layer
    assert torch.isfinite(encoder(x, Context(mask=mask))).all()


def test_rows_without_allowed_keys_are_opened_for_the_fused_kernel() -> None:
    """Some fused kernels (and torch < 2.5) return NaN for a softmax over only masked keys."""
    allowed = torch.tensor([[True, False, False], [False, False, False]])
    assert nonempty_rows(allowed).tolist() == [[True, False, False], [True, True, True]]
    assert nonempty_rows(None) is None
    scores = torch.randn(2, 3, requires_grad=True)
    weights = masked_softmax(scores, allowed)
    assert weights.tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    (weights * torch.randn(2, 3)).sum().backward()
    assert scores.grad is not None and torch.isfinite(scores.grad).all()


# ------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("name", ["mh_dot_src_att", "mh_dot_att", "dot_src_att", "mlp_src_att", "mlp_att"])
def test_source_attention_not_in_encoder(name: str) -> None:
    text = f"pos -> res({name})"
    with pytest.raises(ADLError) as err:
        build_chain(text, Side.ENCODER, D)
    assert "encoder" in err.value.message and name in err.value.message
    assert err.value.column == text.index(name)


@pytest.mark.parametrize("name", ["mh_dot_self_att", "mh_dot_src_att"])
def test_heads_must_divide_the_width(name: str) -> None:
    text = f"pos -> {name}(heads=3)"
    with pytest.raises(ADLError) as err:
        build_chain(text, Side.DECODER, D, encoder_width=D)
    assert "heads=3" in err.value.message and str(D) in err.value.message
    assert err.value.column == text.index("heads=3")
    # From the model option: the caret is on the layer and the message says where 3 came from.
    with pytest.raises(ADLError, match="heads option") as err:
        build_chain(f"pos -> {name}", Side.DECODER, D, ModelOptions(d_model=D, heads=3), encoder_width=D)
    assert err.value.column == text.index(name)


def test_scale_must_be_positive() -> None:
    text = "dot_self_att(s=0)"
    with pytest.raises(ADLError, match="> 0") as err:
        build_chain(text, Side.ENCODER, D)
    assert err.value.column == text.index("s=0")


def test_increasing_needs_matching_block_counts() -> None:
    text = "repeat(2, res(mh_dot_src_att(source=increasing)))"
    with pytest.raises(ADLError) as err:
        build_chain(text, Side.DECODER, D, encoder=BlockInfo(3, [D] * 3), encoder_width=D)
    assert "decoder has 2" in err.value.message and "encoder 3" in err.value.message
    assert err.value.column == text.index("source=")
    build_chain(text, Side.DECODER, D, encoder=BlockInfo(2, [D] * 2), encoder_width=D)  # matching: fine


@pytest.mark.parametrize(
    ("text", "encoder", "message"),
    [
        ("res(mh_dot_src_att(source=increasing))", BlockInfo(1, [D]), "top-level repeat"),
        ("repeat(2, res(mlp_att(source=decreasing)))", BlockInfo(), "encoder has no top-level repeat"),
        ("repeat(2, res(dot_src_att(source=decreasing)))", None, "encoder has no top-level repeat"),
    ],
)
def test_block_sources_need_encoder_blocks(text: str, encoder: BlockInfo | None, message: str) -> None:
    with pytest.raises(ADLError, match=message) as err:
        build_chain(text, Side.DECODER, D, encoder=encoder, encoder_width=D)
    assert err.value.column == text.index("source=")


def test_fused_attention_trains_bf16_in_fp32_on_the_cpu() -> None:
    """Under CPU bf16 autocast with gradients the kernel runs in fp32 (its bf16 backward is slow): bf16 result,
    and gradients equal to the fp32 ones computed from the same bf16-rounded inputs."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 7, 8).bfloat16().requires_grad_() for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fused_attention(q, k, v, is_causal=True, scale=0.3)
    assert out.dtype == torch.bfloat16
    out.float().square().sum().backward()
    reference = [x.detach().float().requires_grad_() for x in (q, k, v)]
    expected = torch.nn.functional.scaled_dot_product_attention(*reference, is_causal=True, scale=0.3)
    expected.bfloat16().float().square().sum().backward()
    assert torch.equal(out, expected.bfloat16())
    for got, want in zip((q, k, v), reference, strict=True):
        assert torch.allclose(got.grad.float(), want.grad.bfloat16().float(), rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------------------------- attention dropout


@pytest.mark.parametrize(
    ("adl", "side"),
    [
        ("mh_dot_self_att(att_dropout=0.5)", Side.ENCODER),
        ("mh_dot_self_att(att_dropout=0.5)", Side.DECODER),
        ("mh_dot_src_att(att_dropout=0.5)", Side.DECODER),
        ("dot_src_att(att_dropout=0.5)", Side.DECODER),
    ],
)
def test_att_dropout_drops_attention_weights_in_training_only(adl: str, side: Side) -> None:
    setup = build(adl, side)
    plain = build(adl.replace("0.5", "0.0"), side)
    plain.layer.load_state_dict(setup.layer.state_dict())
    x = torch.randn(2, 5, D)
    mask = lengths_mask([5, 3], 5)
    memory = make_memory(setup, 2) if side is Side.DECODER else None

    def output(s: Setup, probs: list[Tensor] | None = None) -> Tensor:
        return s.layer(x, Context(mask=mask, memory=memory, attention=probs))

    torch.manual_seed(0)
    setup.layer.eval(), plain.layer.eval()
    assert torch.equal(output(setup), output(plain))  # no dropout when not training
    setup.layer.train(), plain.layer.train()
    torch.manual_seed(0)
    assert torch.equal(output(plain), output(plain))  # att_dropout=0 stays deterministic while training
    dropped = output(setup)
    assert not torch.allclose(dropped, output(plain), atol=1e-4)
    if "src" in adl:  # the explicit path (attention weights asked for) drops out too, and keeps them intact
        probs: list[Tensor] = []
        assert not torch.allclose(output(setup, probs), output(plain), atol=1e-4)
        assert torch.allclose(probs[0].sum(-1), torch.ones(()))


def test_att_dropout_is_checked_and_printed() -> None:
    assert canonical("mh_dot_self_att(att_dropout=0.1)").endswith("att_dropout=0.1)")
    with pytest.raises(ADLError, match="att_dropout"):
        build_chain("mh_dot_self_att(att_dropout=1.5)", Side.ENCODER, D, ModelOptions(d_model=D, heads=4))
