"""Lexical shortlists: building, the file format, the restricted search (identical output whenever the full softmax's
choice is in the shortlist, with two batch compositions) and bad inputs."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from adlnmt.cli import main
from adlnmt.data.data_dir import DataDir
from adlnmt.data.prepare import prepare
from adlnmt.errors import UserError
from adlnmt.inference.batching import length_batches
from adlnmt.inference.search import SearchOptions, translate_ids
from adlnmt.inference.shortlist import SPECIALS, Shortlist, load_shortlist, vocabulary_digests
from adlnmt.inference.shortlist_build import build_shortlist
from adlnmt.inference.translator import Translator
from adlnmt.inference.vocabulary_slice import VocabularySlice
from test_search import DECODERS, ENCODER


@pytest.fixture(scope="module")
def translator(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Translator:
    """A tiny Transformer trained 40 updates on the demo corpus."""
    model_dir = tmp_path_factory.mktemp("shortlisted")
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(model_dir), "--encoder", ENCODER,
            "--decoder", DECODERS["transformer"], "--d-model", "32", "--heads", "4", "--batch-tokens", "800",
            "--lr", "3e-3", "--max-updates", "40", "--checkpoint-interval", "40", "--no-valid-bleu",
            "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    return Translator.load(model_dir)


@pytest.fixture(scope="module")
def built(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("shortlist") / "lex.safetensors"
    assert main(["shortlist", "--data", str(demo_data / "data"), "--k", "5", "--out", str(path)]) == 0
    return path


def demo_sources(translator: Translator, demo_data: Path, count: int = 16) -> list[list[int]]:
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:count]
    return [translator.data.encode_source(line) for line in lines]


def only_frequent(data: DataDir, ids: set[int], path: Path) -> Path:
    """A shortlist without per-source lists whose frequent pieces are ``ids``: every batch may output exactly them."""
    size = data.tgt_vocab.size
    frequent = np.array(sorted(ids - set(SPECIALS)), dtype=np.int64)
    Shortlist(max(1, len(frequent)), "test", *vocabulary_digests(data), data.src_vocab.size, size,
              np.zeros(data.src_vocab.size + 1, np.int64), np.zeros(0, np.int64), frequent).save(path)  # fmt: skip
    return path


def test_built_lists_are_the_best_dice_targets(demo_data: Path, built: Path) -> None:
    data = DataDir.load(demo_data / "data")
    shortlist = load_shortlist(built)
    assert shortlist.k == 5 and shortlist.method == "dice" and len(shortlist.frequent) == 5
    assert (shortlist.src_digest, shortlist.tgt_digest) == vocabulary_digests(data)
    split = data.split("train")
    pairs = [(set(split.src_pieces(i).tolist()), set(split.tgt_pieces(i).tolist())) for i in range(len(split))]
    source = max(range(len(SPECIALS), data.src_vocab.size), key=lambda s: sum(s in src for src, _ in pairs))
    with_source = [tgt for src, tgt in pairs if source in src]

    def dice(t: int) -> float:
        return 2 * sum(t in tgt for tgt in with_source) / (len(with_source) + sum(t in tgt for _, tgt in pairs))

    scores = sorted((-dice(t), t) for t in set().union(*with_source) - set(SPECIALS))
    assert shortlist.translations(source).tolist() == [t for _, t in scores[:5]]
    tokens = np.concatenate([split.tgt_pieces(i) for i in range(len(split))])
    counts = np.bincount(tokens, minlength=data.tgt_vocab.size)
    counts[list(SPECIALS)] = 0
    assert sorted(counts[shortlist.frequent].tolist(), reverse=True) == sorted(counts.tolist(), reverse=True)[:5]


def test_a_sharded_directory_gives_the_shortlist_of_one_shard(
    demo_data: Path, built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same corpus and vocabulary in several training shards: every shard is counted, and the lists are those
    of the one-shard directory."""
    import adlnmt.data.prepare as prepare_module

    corpus = demo_data / "corpus"
    monkeypatch.setattr(prepare_module, "CHUNK_PAIRS", 300)  # shard boundaries come at chunk ends
    prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt",
            tmp_path / "sharded", shard_size=300, vocab_from=demo_data / "data")  # fmt: skip
    sharded = DataDir.load(tmp_path / "sharded")
    assert len(sharded.shards("train")) == 4
    one, many = load_shortlist(built), build_shortlist(sharded, 5)
    assert (many.src_digest, many.tgt_digest) == (one.src_digest, one.tgt_digest)
    for name in ("offsets", "targets", "frequent"):
        assert np.array_equal(getattr(many, name), getattr(one, name)), name


def test_greedy_output_is_unchanged_when_the_shortlist_holds_its_choices(translator, demo_data, tmp_path) -> None:
    sources = demo_sources(translator, demo_data)
    full = translate_ids(translator.model, sources, SearchOptions(beam=1))
    chosen = {token for hyps in full for token in hyps[0].tokens}
    path = only_frequent(translator.data, chosen, tmp_path / "chosen.safetensors")
    assert len(load_shortlist(path).allowed(sources)) < translator.data.tgt_vocab.size  # really restricted
    for batch_size in (16, 3):  # two batch compositions
        options = SearchOptions(beam=1, batch_size=batch_size, shortlist=str(path))
        found = translate_ids(translator.model, sources, options)
        assert [h[0].tokens for h in found] == [h[0].tokens for h in full]
        for a, b in zip(found, full, strict=True):  # normalised over fewer words: at least as likely
            assert a[0].log_prob >= b[0].log_prob - 1e-4


def test_a_shortlist_of_the_whole_vocabulary_changes_nothing(translator, demo_data, tmp_path) -> None:
    sources = demo_sources(translator, demo_data)
    path = only_frequent(translator.data, set(range(translator.data.tgt_vocab.size)), tmp_path / "all.safetensors")
    for beam in (1, 4):
        options = SearchOptions(beam=beam, nbest=beam)
        full = translate_ids(translator.model, sources, options)
        found = translate_ids(translator.model, sources, replace(options, shortlist=str(path)))
        assert [[h.tokens for h in hyps] for hyps in found] == [[h.tokens for h in hyps] for hyps in full]
        scores = [h.score for hyps in found for h in hyps]
        assert scores == pytest.approx([h.score for hyps in full for h in hyps], abs=1e-4)


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("batch_size", [16, 5])
def test_outputs_stay_in_their_batchs_shortlist(translator, demo_data, built, beam: int, batch_size: int) -> None:
    sources = demo_sources(translator, demo_data)
    shortlist = load_shortlist(built)
    options = SearchOptions(beam=beam, nbest=beam, batch_size=batch_size, shortlist=str(built))
    found = translate_ids(translator.model, sources, options)
    for rows in length_batches([len(s) for s in sources], batch_size):
        allowed = set(shortlist.allowed([sources[i] for i in rows]).tolist())
        assert allowed < set(range(translator.data.tgt_vocab.size))
        for i in rows:
            assert found[i] and all(set(h.tokens) <= allowed for h in found[i])


def test_prefix_ids_are_always_allowed(translator, demo_data, built) -> None:
    sources = demo_sources(translator, demo_data, 4)
    shortlist = load_shortlist(built)
    outside = [t for t in range(len(SPECIALS), translator.data.tgt_vocab.size)
               if t not in set(shortlist.allowed(sources).tolist())][:2]  # fmt: skip
    prefixes = [outside, [], outside[:1], []]
    for beam in (1, 3):
        options = SearchOptions(beam=beam, shortlist=str(built))
        found = translate_ids(translator.model, sources, options, prefixes=prefixes)
        for prefix, hyps in zip(prefixes, found, strict=True):
            assert hyps[0].tokens[: len(prefix)] == prefix


def test_the_translator_and_int8_take_a_shortlist(translator, demo_data, built, tmp_path, capsys) -> None:
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:6]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    for precision in ("fp32", "int8"):
        argv = ["translate", "--model", str(translator.model_dir), "--input", str(tmp_path / "in.txt"),
                "--output", str(tmp_path / "out.txt"), "--shortlist", str(built), "--precision", precision,
                "--beam", "2"]  # fmt: skip
        assert main(argv) == 0
        assert len((tmp_path / "out.txt").read_text().splitlines()) == len(lines)


def test_a_vocabulary_slice_keeps_the_special_ids() -> None:
    vocabulary = VocabularySlice(np.array([0, 1, 2, 3, 7, 9]), 12)
    assert vocabulary.to_ids(torch.tensor([3, 4, 5])).tolist() == [3, 7, 9]
    assert vocabulary.to_positions(torch.tensor([0, 9, 7])).tolist() == [0, 5, 4]
    with pytest.raises(ValueError, match="specials first"):
        VocabularySlice(np.array([0, 1, 3, 7]), 12)


def test_bad_k_is_refused(demo_data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "k.safetensors"
    for k in ("0", "-3"):
        with pytest.raises(SystemExit):
            main(["shortlist", "--data", str(demo_data / "data"), "--k", k, "--out", str(out)])
        assert "--k: must be" in capsys.readouterr().err
    with pytest.raises(UserError, match="positive number of target pieces, got 0"):
        build_shortlist(DataDir.load(demo_data / "data"), 0)
    assert not out.exists()


def test_an_existing_file_is_not_overwritten(demo_data: Path, built: Path, capsys) -> None:
    before = built.read_bytes()
    assert main(["shortlist", "--data", str(demo_data / "data"), "--k", "2", "--out", str(built)]) != 0
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert built.read_bytes() == before
    args = ["shortlist", "--data", str(demo_data / "data"), "--k", "2", "--overwrite", "--out"]
    assert main([*args, str(built.parent)]) == 2  # a directory: never written into or over
    assert f"{built.parent}: a directory; give the shortlist file's path" in capsys.readouterr().err
    assert main([*args, str(built / "lex.safetensors")]) == 2  # a file where its folder should be
    assert f"{built / 'lex.safetensors'}: cannot write (Not a directory)" in capsys.readouterr().err
    assert built.read_bytes() == before


def test_the_data_directorys_own_files_are_never_overwritten(demo_data: Path, tmp_path: Path, capsys) -> None:
    """--overwrite replaces an old shortlist, never a file of the --data it reads (its manifest, vocabularies,
    arrays or raw text): that would destroy the data directory. A new file beside them is fine."""
    data = tmp_path / "data"
    shutil.copytree(demo_data / "data", data)
    for name in ("manifest.json", "spm.model", "spm.vocab", "valid.tgt.txt", "train.train.00000.src.tokens.npy"):
        before = (data / name).read_bytes()
        assert main(["shortlist", "--data", str(data), "--k", "2", "--overwrite", "--out", str(data / name)]) == 2
        assert f"{data / name}: the same file as the input {data / name}" in capsys.readouterr().err
        assert (data / name).read_bytes() == before
    assert main(["shortlist", "--data", str(data), "--k", "2", "--out", str(data / "lex.safetensors")]) == 0
    assert load_shortlist(data / "lex.safetensors").k == 2


def test_a_shortlist_for_other_vocabularies_is_refused(translator, demo_data, tmp_path) -> None:
    corpus = demo_data / "corpus"
    prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt",
            tmp_path / "other", vocab_size=120)  # fmt: skip
    other = tmp_path / "other.safetensors"
    build_shortlist(DataDir.load(tmp_path / "other"), 3).save(other)
    with pytest.raises(UserError, match="built for another source and target vocabulary than the model's"):
        translator.search(["a b c"], SearchOptions(beam=1, shortlist=str(other)))
    with pytest.raises(UserError, match="built for a target vocabulary of"):
        translate_ids(translator.model, [[5, 3]], SearchOptions(beam=1, shortlist=str(other)))


def test_a_shortlist_is_checked_by_the_vocabularies_tables_not_their_files_bytes(
    translator, demo_data, tmp_path
) -> None:
    """The model's vocabularies written with their path inside (sentencepiece's files before 2026-11-30): other bytes,
    the same ids, so a shortlist built from that copy of the data serves the model."""
    from sentencepiece import sentencepiece_model_pb2

    copy = tmp_path / "data"
    shutil.copytree(demo_data / "data", copy)
    for model in copy.glob("*.model"):
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(model.read_bytes())
        proto.trainer_spec.model_prefix = str(model.with_suffix(""))
        model.write_bytes(proto.SerializeToString())
    data = DataDir.load(copy)
    assert data.src_vocab.to_bytes() != translator.data.src_vocab.to_bytes()
    path = tmp_path / "lex.safetensors"
    build_shortlist(data, 3).save(path)
    assert len(translator.search(["a b c"], SearchOptions(beam=1, shortlist=str(path)))) == 1


def test_damaged_shortlists_are_refused(built: Path, tmp_path: Path) -> None:
    shortlist = load_shortlist(built)
    cases = {
        "bad id": replace(shortlist, frequent=np.array([shortlist.tgt_size], np.int64)),
        "too long": replace(shortlist, frequent=np.arange(4, 4 + shortlist.k + 1, dtype=np.int64)),
        "offsets": replace(shortlist, offsets=shortlist.offsets[:-1]),
        "dtype": replace(shortlist, targets=shortlist.targets.astype(np.int32)),
    }
    messages = {"bad id": "outside the target vocabulary", "too long": "longer than k", "offsets": "offsets do not",
                "dtype": "not a 1-d int64 array"}  # fmt: skip
    for name, damaged in cases.items():
        path = tmp_path / f"{name}.safetensors"
        damaged.save(path)
        with pytest.raises(UserError, match=messages[name]):
            Shortlist.load(path)
    (tmp_path / "garbage").write_bytes(b"\x00\x01 not safetensors")
    with pytest.raises(UserError, match="garbage: not a shortlist file"):
        Shortlist.load(tmp_path / "garbage")
    with pytest.raises(UserError, match="no such shortlist file"):
        load_shortlist(tmp_path / "missing")
    with pytest.raises(UserError, match=r"a directory, not a shortlist file \(give the file"):
        load_shortlist(tmp_path)  # e.g. the data directory it was built from
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    with safe_open(str(built), "np") as handle:  # format 1 digested the vocabularies' bytes: not comparable
        metadata = {**(handle.metadata() or {}), "format_version": "1"}
    save_file(load_file(str(built)), str(tmp_path / "v1"), metadata=metadata)
    with pytest.raises(UserError, match=r"version 2 \(found 'adlnmt-shortlist' version '1'\); build it again"):
        Shortlist.load(tmp_path / "v1")


def test_engines_without_shortlists_and_cuda_graphs_refuse_one(translator, built) -> None:
    with pytest.raises(UserError, match="--cuda-graphs do not go together"):
        translate_ids(translator.model, [[5, 3]], SearchOptions(beam=1, shortlist=str(built), cuda_graphs=True))
    from adlnmt.inference.engine import CAPABILITIES

    assert not CAPABILITIES["onnxruntime"].shortlist and not CAPABILITIES["ensemble"].shortlist
    assert CAPABILITIES["onnxruntime"].missing(SearchOptions(shortlist=str(built))) == ["shortlist"]
