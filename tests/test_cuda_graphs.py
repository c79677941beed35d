"""The static-shape decoder step of :mod:`adlnmt.inference.cuda_graphs` (padded rows and source, fixed caches, in-place
reorders and drops), run eagerly on the CPU: the same tokens as the plain search for every decoder family."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from adlnmt.data.vocab import BOS
from adlnmt.inference.cuda_graphs import BUCKETS, GraphStepper
from adlnmt.inference.search import SearchOptions, pad_batch, translate_ids
from adlnmt.inference.stepper import Stepper
from test_stepper import DECODERS, VOCAB, session, tiny


def random_sources(count: int, seed: int = 3) -> list[list[int]]:
    draw = random.Random(seed)
    return [[draw.randrange(3, VOCAB) for _ in range(draw.randint(1, 12))] + [2] for _ in range(count)]


@pytest.mark.parametrize("family", list(DECODERS))
def test_padded_steps_equal_plain_steps_through_reorders_and_drops(family: str) -> None:
    model = tiny(DECODERS[family])
    plain = session(model, True, beams=2)
    plain.alignments = False
    graphed = GraphStepper(model, plain.memory, steps=8)
    assert graphed.bucket.rows > 6 and graphed.bucket.source_length > 6  # rows and source really padded
    tokens = torch.full((6,), BOS, dtype=torch.long)
    generator = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        for step in range(7):
            (plain_lp, _), (graphed_lp, _) = plain.step(tokens), graphed.step(tokens)
            torch.testing.assert_close(graphed_lp, plain_lp, atol=1e-5, rtol=1e-5)
            if step == 2:
                for stepper in (plain, graphed):
                    stepper.reorder(torch.tensor([1, 1, 3, 2, 4, 5]))
            if step == 4:
                for stepper in (plain, graphed):
                    stepper.select(torch.tensor([0, 1, 4, 5]))
            tokens = torch.randint(3, VOCAB, (plain.prefix.size(0),), generator=generator)


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("family", list(DECODERS))
def test_search_with_cuda_graphs_switch_finds_the_same_tokens(family: str, beam: int) -> None:
    model = tiny(DECODERS[family])
    sources = random_sources(23)
    options = SearchOptions(beam=beam, nbest=beam, batch_size=7)  # 4 batches of different sizes: buckets reused
    with torch.inference_mode():
        plain = translate_ids(model, sources, options)
        graphed = translate_ids(model, sources, dataclasses.replace(options, cuda_graphs=True))
    for plain_hyps, graphed_hyps in zip(plain, graphed, strict=True):
        assert [h.tokens for h in graphed_hyps] == [h.tokens for h in plain_hyps]
        for p, g in zip(plain_hyps, graphed_hyps, strict=True):
            assert g.score == pytest.approx(p.score, abs=1e-4)


def test_cuda_graphs_fall_back_with_a_note_where_they_do_not_apply() -> None:
    model = tiny(DECODERS["transformer"])
    options = SearchOptions(beam=2, alignments=True, cuda_graphs=True)
    with pytest.warns(UserWarning, match="CUDA graphs off: alignments"), torch.inference_mode():
        found = translate_ids(model, random_sources(3), options)
    assert all(h[0].alignment is not None for h in found)


def test_a_step_past_the_bucket_cache_is_refused() -> None:
    model = tiny(DECODERS["aan"])
    memory = model.encode(torch.tensor([[5, 6, 2]]))
    graphed = GraphStepper(model, memory, steps=1)
    tokens = torch.tensor([BOS])
    with torch.inference_mode(), pytest.raises(RuntimeError, match="cached positions"):
        for _ in range(graphed.bucket.steps + 1):
            graphed.step(tokens)
    assert isinstance(graphed, Stepper)


def test_buckets_of_moved_or_converted_weights_are_dropped() -> None:
    model = tiny(DECODERS["transformer"])
    options = SearchOptions(beam=2, cuda_graphs=True)
    with torch.inference_mode():
        before = translate_ids(model, random_sources(5), options)
        old = list(BUCKETS[model])
        model.double().float()  # new parameter tensors: graphs captured on the old ones would read freed memory
        after = translate_ids(model, random_sources(5), options)
    assert old and not any(bucket in BUCKETS[model] for bucket in old)
    assert [h[0].tokens for h in after] == [h[0].tokens for h in before]


def state_addresses(stepper: GraphStepper) -> set[int]:
    """Where every tensor a captured step reads or writes lives (a graph replays on these addresses)."""
    state, bucket = stepper.state, stepper.bucket
    assert state is not None and bucket.log_probs is not None
    tensors = [*state.static.values(), *state.dynamic.values(), *(e.buffer for e in state.growing.values())]
    tensors += [*GraphStepper.bucket_tensors(bucket.memory), bucket.tokens, bucket.log_probs]
    return {t.data_ptr() for t in tensors}


@pytest.mark.parametrize("family", list(DECODERS))
def test_every_step_of_every_batch_in_a_bucket_uses_the_same_buffers(family: str) -> None:
    model = tiny(DECODERS[family])
    seen: set[frozenset[int]] = set()
    with torch.inference_mode():
        for sources in (pad_batch([[5, 6, 7, 2], [8, 2]]), pad_batch([[9, 10, 2]])):  # the second batch: 1 row
            stepper = GraphStepper(model, model.encode(sources).select(torch.arange(sources.size(0)).repeat(2)), 6)
            tokens = torch.full((stepper.rows,), BOS, dtype=torch.long)
            for step in range(5):
                stepper.step(tokens)
                seen.add(frozenset(state_addresses(stepper)))
                if step == 2:
                    stepper.reorder(torch.arange(stepper.rows).flip(0))
                if step == 3 and stepper.rows > 2:
                    stepper.select(torch.tensor([0, 1]))
                tokens = torch.full((stepper.rows,), 7, dtype=torch.long)
    assert len(seen) == 1
