"""An imported MarianMT model computes what ``transformers`` computes: tokenizer ids, teacher-forced log-probabilities
(within 1e-5), greedy and beam-5 outputs (token-identical to ``generate``), for several configurations.

Matched settings: ``generate`` with ``bad_words_ids=[[pad]]`` (OPUS-MT's generation config), ``do_sample=False``,
``max_new_tokens`` = adlnmt's length limit + 1 (adlnmt's limit counts tokens before EOS) with adlnmt's rule at the
limit (:class:`EndAtLimit`, in place of ``forced_eos_token_id``), and for beam search
``length_penalty=0`` with ``early_stopping=True`` (adlnmt's --length-penalty 0: both stop a sentence at k ended
hypotheses ranked by log-probability). MarianMT's pad token carries probability mass in ``transformers``' softmax
(a zero row, logit = its bias) although it can never be emitted; Marian's own softmax has no such class, and the import
follows Marian (its bias becomes -100: no mass in float32 sums). The log-probability and beam comparisons therefore
give the pad class no mass on the transformers side too (its final_logits_bias set to -100; greedy compares the
unchanged model: the argmax is the same either way)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from adlnmt.inference.batching import length_limit
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.search import translate_ids
from adlnmt.interop.hf_import import import_marian
from adlnmt.interop.marian_vocab import NEVER_PREDICTED
from adlnmt.store import ModelDir
from interop.marian_fixtures import SAMPLE, marian_dir

transformers = pytest.importorskip("transformers")

CONFIGURATIONS = {
    "swish-2+1-tied": {},
    "relu-1+3-untied-output": {"activation_function": "relu", "encoder_layers": 1, "decoder_layers": 3,
                               "tie_word_embeddings": False},
    "gelu-3+2-unshared": {"activation_function": "gelu", "encoder_layers": 3, "decoder_layers": 2,
                          "share_encoder_decoder_embeddings": False, "scale_embedding": False},
    "swish-2+2-separate-vocabs": {"separate": True, "decoder_layers": 2},
    "relu-1+2-separate-vocabs-untied": {"separate": True, "activation_function": "relu", "encoder_layers": 1,
                                        "decoder_layers": 2, "tie_word_embeddings": False},
}  # fmt: skip
SENTENCES = SAMPLE


@pytest.fixture(scope="module")
def corpus(demo_data: Path) -> Path:
    return demo_data / "corpus"


@pytest.fixture(scope="module", params=list(CONFIGURATIONS))
def pair(request, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp(request.param)
    hf = marian_dir(corpus, root / "hf", seed=len(request.param), **CONFIGURATIONS[request.param])
    imported = import_marian(root / "hf", root / "model")
    model, data, _ = ModelDir(root / "model").load_model("best")
    return hf, model.eval(), data, imported.vocabularies, root


class EndAtLimit(transformers.LogitsProcessor):
    """adlnmt's rule at the length limit (a hypothesis of ``limit`` tokens may only end, </s> keeping its own
    log-probability) in place of ``forced_eos_token_id`` (which gives the forced </s> log-probability 0 in beam
    search, and so ranks hypotheses cut at the limit otherwise)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if input_ids.size(1) <= self.limit:  # the start token and fewer than ``limit`` tokens
            return scores
        forced = torch.full_like(scores, float("-inf"))
        forced[:, 0] = scores[:, 0]
        return forced


def sources(corpus: Path) -> list[str]:
    return (corpus / "valid.src").read_text(encoding="utf-8").splitlines()[:SENTENCES]


def marian_ids(vocabulary, ids: list[int]) -> list[int]:
    return [vocabulary.rows[i] for i in ids]


def test_tokenizer_ids_equal_marian_tokenizers(pair, corpus: Path) -> None:
    _, _, data, vocabularies, root = pair
    tokenizer = transformers.MarianTokenizer.from_pretrained(root / "hf")
    targets = (corpus / "valid.tgt").read_text(encoding="utf-8").splitlines()[:SENTENCES]
    for text, target in zip(sources(corpus), targets, strict=True):
        assert marian_ids(vocabularies["src"], data.encode_source(text)) == tokenizer(text)["input_ids"]
        expected = tokenizer(text_target=target)["input_ids"]
        assert marian_ids(vocabularies["tgt"], [*data.tgt_vocab.encode(target), 3]) == expected


def test_teacher_forced_log_probs_equal(pair, corpus: Path) -> None:
    hf, model, data, vocabularies, _ = pair
    pad = hf.config.pad_token_id
    target_vocabulary = vocabularies["tgt"]
    order = torch.tensor([row if row is not None else pad for row in target_vocabulary.rows])
    real = torch.tensor([not never for never in target_vocabulary.never])
    targets = (corpus / "valid.tgt").read_text(encoding="utf-8").splitlines()[:SENTENCES]
    for text, target in zip(sources(corpus), targets, strict=True):
        src = data.encode_source(text)
        tgt = [*data.tgt_vocab.encode(target), 3]
        with torch.no_grad():
            ours = torch.log_softmax(model(torch.tensor([src]), torch.tensor([[2, *tgt[:-1]]])), -1)[0]
            decoder_input = torch.tensor([[pad, *marian_ids(target_vocabulary, tgt[:-1])]])
            source = torch.tensor([marian_ids(vocabularies["src"], src)])
            logits = hf(input_ids=source, decoder_input_ids=decoder_input).logits[0]
            logits[:, pad] = float("-inf")
            theirs = torch.log_softmax(logits, -1)
        assert torch.allclose(ours[:, real], theirs[:, order[real]], atol=1e-5, rtol=0)
        assert ours[:, ~real].max() < -50  # PAD, BOS (MarianMT's pad) and <unk> aliases: never predicted


@pytest.mark.parametrize("beam", [1, 5])
def test_search_equals_generate(pair, corpus: Path, beam: int) -> None:
    hf, model, data, vocabularies, _ = pair
    pad = hf.config.pad_token_id
    options = SearchOptions(beam=beam, length_penalty=0.0, batch_size=4, max_len_ratio=1.5, max_len_extra=5)
    encoded = [data.encode_source(text) for text in sources(corpus)]
    found = translate_ids(model, encoded, options)
    if beam > 1:
        with torch.no_grad():
            hf.final_logits_bias[0, pad] = NEVER_PREDICTED
    ended = 0
    for src, hyps in zip(encoded, found, strict=True):
        limit = length_limit(len(src), options)
        output = hf.generate(torch.tensor([marian_ids(vocabularies["src"], src)]), num_beams=beam, do_sample=False,
                             max_new_tokens=limit + 1, bad_words_ids=[[pad]], length_penalty=0.0,
                             early_stopping=True, forced_eos_token_id=None,
                             logits_processor=[EndAtLimit(limit)])[0, 1:].tolist()  # fmt: skip
        output = output[: output.index(0)] if 0 in output else output
        assert marian_ids(vocabularies["tgt"], hyps[0].tokens) == output
        ended += len(hyps[0].tokens) < limit
    assert ended >= SENTENCES // 3  # most outputs end by themselves, not at the length limit


def test_imported_model_dir_is_complete(pair) -> None:
    _, model, data, vocabularies, root = pair
    stored = ModelDir(root / "model").config()
    assert stored["imported"]["from"] == "hf-marian"
    assert data.src_vocab.size == vocabularies["src"].size == model.config.src_vocab_size
    assert data.tgt_vocab.size == vocabularies["tgt"].size == model.config.tgt_vocab_size
    separate = vocabularies["src"] is not vocabularies["tgt"]
    assert stored["imported"]["separate_vocabs"] is separate
    pieces = [vocab.pieces(list(range(vocab.size))) for vocab in (data.src_vocab, data.tgt_vocab)]
    assert separate is (pieces[0] != pieces[1])
    assert stored["canonical"]["encoder"].startswith("pos(layout=halves")
    from adlnmt.store.model_dir import weights_model_id  # the import is a model of its own, named in its weights

    assert weights_model_id(root / "model" / "best.safetensors") == stored["model_id"] != ""
