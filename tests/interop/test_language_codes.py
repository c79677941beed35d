"""Multilingual MarianMT target-language codes (``>>fra<< text``): translate, serve and score read a leading code as
one token, as MarianTokenizer does (:mod:`adlnmt.data.language_codes`); the ids, the greedy output and the
forced scores equal ``transformers``' on a tiny random multi-target model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from adlnmt.analysis.forced import PairScorer
from adlnmt.data.language_codes import SourceEncoder, split_language_code
from adlnmt.inference.batching import length_limit
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.translator import Translator
from adlnmt.interop.hf_import import import_marian
from interop.marian_fixtures import marian_dir

transformers = pytest.importorskip("transformers")
CODES = (">>fra<<", ">>deu<<")


@pytest.fixture(scope="module")
def multilingual(demo_data: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("codes")
    hf = marian_dir(demo_data / "corpus", root / "hf", seed=9, codes=CODES)
    imported = import_marian(root / "hf", root / "model")
    return hf, imported.vocabularies["src"], Translator.load(root / "model"), root


def texts(demo_data: Path) -> list[str]:
    sentences = (demo_data / "corpus" / "valid.src").read_text(encoding="utf-8").splitlines()[:4]
    lines = []
    for sentence in sentences:
        lines += [f">>fra<< {sentence}", f">>deu<<{sentence}", f">>ita<< {sentence}", f"{sentence} >>fra<<",
                  f" >>fra<< {sentence}", f">>fra << {sentence}"]  # fmt: skip
    return lines


def test_split_language_code() -> None:
    assert split_language_code(">>fra<< Le chien") == (">>fra<<", " Le chien")
    assert split_language_code(">>fra<<<< x <<") == (">>fra<<", "<< x <<")  # up to the first <<
    assert split_language_code(" >>fra<< x") == (None, " >>fra<< x")
    assert split_language_code("x >>fra<<") == (None, "x >>fra<<")


def test_source_ids_equal_marian_tokenizers(multilingual, demo_data: Path) -> None:
    _, vocabulary, translator, root = multilingual
    tokenizer = transformers.MarianTokenizer.from_pretrained(root / "hf")
    assert translator.source_encoder.codes
    for text in texts(demo_data):
        ids = translator.encode_line(text).ids
        assert [vocabulary.rows[i] for i in ids] == tokenizer(text)["input_ids"], text
    table = json.loads((root / "hf" / "vocab.json").read_text())
    assert vocabulary.rows[translator.encode_line(">>fra<< Hallo").ids[0]] == table[">>fra<<"]


def test_a_vocabulary_without_codes_segments_the_whole_line(demo_data: Path) -> None:
    from adlnmt.data.data_dir import DataDir

    vocab = DataDir.load(demo_data / "data").src_vocab
    encoder = SourceEncoder(vocab)
    assert not encoder.codes and encoder(">>fra<< ein Hund") == vocab.encode(">>fra<< ein Hund")


def test_translate_and_score_with_a_code_equal_transformers(multilingual, demo_data: Path) -> None:
    hf, _, translator, root = multilingual
    tokenizer = transformers.MarianTokenizer.from_pretrained(root / "hf")
    pad = hf.config.pad_token_id
    lines = [line for line in texts(demo_data) if line.startswith(">>")]
    options = SearchOptions(beam=1, max_len_ratio=1.5, max_len_extra=5)
    found = translator.search(lines, options)
    scores = PairScorer(translator).score(lines, [hyps[0].text for hyps in found])
    table = json.loads((root / "hf" / "vocab.json").read_text())
    for line, hyps, scored in zip(lines, found, scores, strict=True):
        ids = tokenizer(line)["input_ids"]
        limit = length_limit(len(ids), options) + 1
        output = hf.generate(torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=limit,
                             bad_words_ids=[[pad]])[0, 1:].tolist()  # fmt: skip
        assert output[: output.index(0) if 0 in output else None] == [table[p] for p in hyps[0].pieces], line
        pieces = scored.pieces[:-1]
        with torch.no_grad():
            decoder_input = torch.tensor([[pad, *(table[p] for p in pieces)]])
            logits = hf(input_ids=torch.tensor([ids]), decoder_input_ids=decoder_input).logits[0]
            logits[:, pad] = float("-inf")
            theirs = torch.log_softmax(logits, -1).gather(1, torch.tensor([[table[p]] for p in [*pieces, "</s>"]]))
        assert torch.allclose(torch.tensor(scored.token_log_probs), theirs[:, 0], atol=1e-5)


def test_serve_reads_a_code_as_one_source_piece(multilingual, demo_data: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from adlnmt.serve.app import create_app
    from adlnmt.serve.limits import ServeOptions

    _, _, translator, root = multilingual
    lines = [line for line in texts(demo_data) if line.startswith(">>fra<< ")][:2]
    options = ServeOptions(model=str(root / "model"), allowed_hosts=("testserver",))
    with TestClient(create_app(options, translator), raise_server_exceptions=False) as client:
        reply = client.post("/translate", json={"text": lines, "beam": 2, "alignments": True})
    assert reply.status_code == 200, reply.text
    expected = translator.search(lines, SearchOptions(beam=2))
    for result, hyps in zip(reply.json()["translations"], expected, strict=True):
        assert result["source_pieces"][0] == ">>fra<<" and result["translation"] == hyps[0].text


def test_codes_survive_the_export(multilingual, demo_data: Path) -> None:
    """Exported back to MarianMT, the codes are entries of vocab.json again: MarianTokenizer reads them as before."""
    from adlnmt.cli import main

    _, _, _, root = multilingual
    assert main(["export", "--model", str(root / "model"), "--format", "hf-marian", "--out", str(root / "out")]) == 0
    original, exported = (transformers.MarianTokenizer.from_pretrained(root / name) for name in ("hf", "out"))
    assert set(exported.supported_language_codes) == set(CODES)
    for text in texts(demo_data):
        assert exported(text)["input_ids"] == original(text)["input_ids"]


def test_prepare_vocab_from_keeps_a_code_one_piece(multilingual, demo_data: Path, tmp_path: Path) -> None:
    """Fine-tuning data of a multi-target model: ``prepare --vocab-from`` encodes its sources as translate does."""
    from adlnmt.cli import main
    from adlnmt.data.data_dir import DataDir

    _, _, translator, root = multilingual
    targets = (demo_data / "corpus" / "valid.tgt").read_text(encoding="utf-8").splitlines()[:4]
    sources = texts(demo_data)[: len(targets)]
    for side, lines in (("src", sources), ("tgt", targets)):
        (tmp_path / f"train.{side}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["prepare", "--train-src", str(tmp_path / "train.src"), "--train-tgt", str(tmp_path / "train.tgt"),
            "--valid-src", str(tmp_path / "train.src"), "--valid-tgt", str(tmp_path / "train.tgt"),
            "--out", str(tmp_path / "data"), "--vocab-from", str(root / "model")]  # fmt: skip
    assert main(argv) == 0
    train = DataDir.load(tmp_path / "data").open_shard("train", 0)
    prepared = [translator.data.source_ids(train.src_pieces(i).tolist()) for i in range(len(sources))]
    assert prepared == [translator.encode_line(text).ids for text in sources]  # the code one id, as translate reads it
