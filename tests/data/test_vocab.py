"""Sentencepiece training (special ids, determinism, tiny corpora) and the Vocab wrapper."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from adlnmt.data.demo import generate_pair
from adlnmt.data.vocab import BOS, EOS, PAD, UNK, Vocab, train_sentencepiece
from adlnmt.errors import DataError


def pieces(model: Path) -> list[tuple[str, float]]:
    """The pieces and scores of a model (its bytes also hold the trainer options, model_prefix included)."""
    processor = Vocab.load(model).processor
    return [(processor.id_to_piece(i), processor.get_score(i)) for i in range(processor.get_piece_size())]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rng = random.Random(5)
    return [side for _ in range(800) for side in generate_pair(rng)]


@pytest.fixture(scope="module")
def vocab(texts: list[str], tmp_path_factory: pytest.TempPathFactory) -> Vocab:
    model = train_sentencepiece(texts, tmp_path_factory.mktemp("spm") / "m", vocab_size=250)
    return Vocab.load(model)


def test_special_ids(vocab: Vocab) -> None:
    assert (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)
    assert [vocab.piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]
    processor = vocab.processor
    assert (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id()) == (0, 1, 2, 3)
    assert vocab.size == len(vocab) == 250


def test_encode_has_no_specials_and_decode_round_trips(vocab: Vocab, texts: list[str]) -> None:
    for text in texts[:50]:
        ids = vocab.encode(text)
        assert ids and min(ids) > EOS
        assert vocab.decode(ids) == text


def test_decode_skips_pad_bos_eos_anywhere(vocab: Vocab) -> None:
    ids = vocab.encode("The cat sleeps.")
    assert vocab.decode([BOS, *ids[:1], PAD, EOS, *ids[1:], EOS, PAD, PAD]) == "The cat sleeps."


def test_unknown_characters_map_to_unk(vocab: Vocab) -> None:
    ids = vocab.encode("The cat Ω sleeps 猫.")
    assert ids.count(UNK) == 2
    assert UNK not in vocab.encode("The cat sleeps.")


def test_training_is_deterministic_and_unigram_works(texts: list[str], tmp_path: Path) -> None:
    first = train_sentencepiece(texts, tmp_path / "a", vocab_size=200)
    second = train_sentencepiece(iter(texts), tmp_path / "elsewhere" / "b", vocab_size=200)
    assert pieces(first) == pieces(second)
    # byte for byte wherever written (a run resumed on data prepared in another folder checks their SHA-256)
    assert first.read_bytes() == second.read_bytes() and b"elsewhere" not in second.read_bytes()
    listing = (tmp_path / "a.vocab").read_text(encoding="utf-8").splitlines()
    assert len(listing) == Vocab.load(first).size and listing[EOS] == "</s>\t0"
    unigram = Vocab.load(train_sentencepiece(texts, tmp_path / "u", vocab_size=200, model_type="unigram"))
    assert unigram.piece(EOS) == "</s>"
    assert unigram.decode(unigram.encode(texts[0])) == texts[0]


def test_tiny_corpus_with_large_vocab_size_does_not_fail(tmp_path: Path) -> None:
    vocab = Vocab.load(train_sentencepiece(["a b c", "abc cab"], tmp_path / "tiny", vocab_size=1000))
    assert 4 < vocab.size < 1000
    assert vocab.decode(vocab.encode("cab a")) == "cab a"


def test_files_as_input(texts: list[str], tmp_path: Path) -> None:
    plain = tmp_path / "a.txt"
    plain.write_text("\n".join(texts[:400]) + "\n\n", encoding="utf-8")
    packed = tmp_path / "b.txt.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(texts[400:800]) + "\n")
    from_files = train_sentencepiece([plain, packed], tmp_path / "f", vocab_size=200)
    from_texts = train_sentencepiece(texts[:800], tmp_path / "t", vocab_size=200)
    assert pieces(from_files) == pieces(from_texts)  # empty lines skipped, gzip read


def test_bad_input_file_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"good line\nbad \xff line\n")
    with pytest.raises(DataError) as info:
        train_sentencepiece([bad], tmp_path / "m", vocab_size=50)
    assert (info.value.path, info.value.line) == (str(bad), 2)
    with pytest.raises(DataError, match="no text"):
        train_sentencepiece(["", "  "], tmp_path / "m", vocab_size=50)


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found") as info:
        Vocab.load(tmp_path / "missing.model")
    assert info.value.path == str(tmp_path / "missing.model")
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"definitely not a protobuf")
    with pytest.raises(DataError, match="not a valid sentencepiece model") as info:
        Vocab.load(junk)
    assert info.value.path == str(junk)


def test_bytes_round_trip(vocab: Vocab) -> None:
    copy = Vocab.from_bytes(vocab.to_bytes())
    assert copy.size == vocab.size
    assert copy.encode("The dogs ran.") == vocab.encode("The dogs ran.")
    with pytest.raises(IndexError):
        vocab.piece(vocab.size)


def test_pieces_and_ids_of_many_equal_one_at_a_time(vocab: Vocab) -> None:
    ids = list(range(vocab.size))
    assert vocab.pieces(ids) == [vocab.piece(i) for i in ids]
    assert vocab.ids(vocab.pieces(ids)) == ids
    assert vocab.pieces([]) == [] and vocab.ids([]) == []
    assert vocab.ids(["not a piece of this vocabulary"]) == [UNK]
    with pytest.raises(IndexError, match="out of range"):
        vocab.pieces([1, vocab.size])
