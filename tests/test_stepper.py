"""The search's decoding session: cached steps equal re-fed prefixes through reorders and dropped rows."""

from __future__ import annotations

import pytest
import torch

from adlnmt.data.vocab import BOS, EOS, PAD
from adlnmt.errors import UserError
from adlnmt.inference.ensemble import Ensemble
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.search import pad_batch, translate_ids
from adlnmt.inference.stepper import Stepper
from adlnmt.model import ModelConfig, Seq2Seq

ENCODER = "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODERS = {
    "transformer": "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "rnn": "pos -> rnn -> res_nd(mh_dot_src_att) -> res_nd(ffl) -> norm",
    "cnn": "pos -> repeat(2, res_nd(cnn(act=relu)) -> res_nd(mh_dot_src_att)) -> norm",
    "aan": "pos -> res(aan) -> norm -> res(mh_dot_src_att) -> norm",
    "ssru": "pos -> res_d(ssru) -> norm -> res_d(mh_dot_src_att) -> norm",
    "comet": "pos -> res_d(mh_dot_src_att) -> norm -> res(comet_conv(norm=layer)) -> norm",
}
VOCAB = 30


def tiny(decoder: str) -> Seq2Seq:
    torch.manual_seed(0)
    return Seq2Seq(ModelConfig(ENCODER, decoder, VOCAB, VOCAB, d_model=16, heads=2)).eval()


def sources() -> torch.Tensor:
    return pad_batch([[5, 6, 7, 8, 9, 2], [10, 11, 2], [12, 13, 14, 2]])  # [3, 6], rows 1 and 2 padded


def session(model: Seq2Seq, incremental: bool, beams: int = 1) -> Stepper:
    """Rows b·beams … b·beams + beams − 1 decode sentence b, as in beam search."""
    memory = model.encode(sources()).select(torch.arange(3).repeat_interleave(beams))
    return Stepper(model, memory, incremental=incremental, alignments=True)


@pytest.mark.parametrize("family", list(DECODERS))
def test_cached_steps_equal_refeeding_through_reorders_and_drops(family: str) -> None:
    model = tiny(DECODERS[family])
    cached, refed = session(model, True, beams=2), session(model, False, beams=2)
    tokens = torch.full((6,), BOS, dtype=torch.long)
    generator = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        for step in range(6):
            (cached_lp, cached_al), (refed_lp, refed_al) = cached.step(tokens), refed.step(tokens)
            torch.testing.assert_close(cached_lp, refed_lp, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(cached_al, refed_al, atol=1e-5, rtol=1e-5)
            if step == 2:  # beam reorders within each sentence: a prefix continued twice, two swapped
                for stepper in (cached, refed):
                    stepper.reorder(torch.tensor([1, 1, 3, 2, 4, 5]))
            if step == 4:  # sentence 1 finished: its rows leave the batch
                for stepper in (cached, refed):
                    stepper.select(torch.tensor([0, 1, 4, 5]))
            tokens = torch.randint(3, VOCAB, (cached.prefix.size(0),), generator=generator)


def test_steps_are_distributions_without_pad_or_bos_and_alignments_cover_the_real_source() -> None:
    stepper = session(tiny(DECODERS["transformer"]), True)
    with torch.inference_mode():
        log_probs, alignment = stepper.step(torch.full((3,), BOS, dtype=torch.long))
    assert log_probs.shape == (3, VOCAB) and alignment is not None and alignment.shape == (3, 6)
    assert torch.isneginf(log_probs[:, PAD]).all() and torch.isneginf(log_probs[:, BOS]).all()
    assert (log_probs.logsumexp(-1) <= 1e-6).all()  # log-probabilities (what PAD and BOS held is dropped)
    torch.testing.assert_close(alignment.sum(-1), torch.ones(3))
    assert (alignment[1, 3:] == 0).all() and (alignment[2, 4:] == 0).all()  # no attention on padding


def test_a_different_step_is_caught() -> None:
    """The equality test above can fail: a model whose cached step sees one token less of history differs."""
    model = tiny(DECODERS["transformer"])
    cached, refed = session(model, True), session(model, False)
    with torch.inference_mode():
        cached.step(torch.full((3,), BOS, dtype=torch.long))
        refed.step(torch.full((3,), 7, dtype=torch.long))  # another prefix
        second = torch.full((3,), 9, dtype=torch.long)
        assert not torch.allclose(cached.step(second)[0], refed.step(second)[0], atol=1e-5)


def test_refeeding_needs_the_torch_model() -> None:
    """The search reads the engine's capabilities: an ensemble (a StepEngine) has no re-fed mode."""
    ensemble = Ensemble([tiny(DECODERS["transformer"])])
    with pytest.raises(UserError, match=r"^the uncached \(re-fed\) search needs the torch engine, not ensemble$"):
        translate_ids(ensemble, [[5, 6, EOS]], SearchOptions(beam=1, incremental=False))
