"""``prepare``: manifest, round trip, binary format, filters, separate vocabularies, overwrite and crash safety."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adlnmt.data.data_dir import MANIFEST
from adlnmt.data.demo import write_demo_corpus
from adlnmt.data.prepare import prepare
from adlnmt.data.vocab import UNK, Vocab
from adlnmt.errors import DataError
from shared_data import MULTI30K, needs_multi30k


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    write_demo_corpus(out, size=1500, seed=7)
    return out


def inputs(corpus: Path) -> tuple[Path, Path, Path, Path]:
    return corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt"


@pytest.fixture(scope="module")
def prepared(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("prepared")
    return out, prepare(*inputs(demo), out, vocab_size=300)


def raw(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def stem(split: str) -> str:
    """The file names' start of a split of one corpus in one shard."""
    return "train.train.00000" if split == "train" else split


def decoded(out: Path, vocab: Vocab, split: str, side: str, i: int) -> str:
    tokens = np.load(out / f"{stem(split)}.{side}.tokens.npy", mmap_mode="r")
    lengths = np.load(out / f"{stem(split)}.{side}.lengths.npy", mmap_mode="r")
    start = int(lengths[:i].sum())
    return vocab.decode(tokens[start : start + int(lengths[i])].tolist())


def test_manifest(prepared: tuple[Path, dict]) -> None:
    out, manifest = prepared
    assert json.loads((out / MANIFEST).read_text()) == manifest
    assert manifest["format_version"] == 3
    assert manifest["joint"] is True and manifest["model_type"] == "bpe"
    assert manifest["src_vocab_size"] == manifest["tgt_vocab_size"] == 300
    assert manifest["spm"] == {"src": "spm.model", "tgt": "spm.model"}
    assert manifest["dtype"] == "uint16"
    assert manifest["special_ids"] == {"pad": 0, "unk": 1, "bos": 2, "eos": 3}
    assert manifest["options"]["max_len"] == 250 and manifest["options"]["max_ratio"] == 3.0
    train, valid = manifest["splits"]["train"], manifest["splits"]["valid"]
    assert {k: train[k] for k in ("read", "empty", "too_long", "bad_ratio", "kept")} == {
        "read": 1500,
        "empty": 0,
        "too_long": 0,
        "bad_ratio": 0,
        "kept": 1500,
    }
    assert valid["read"] == valid["kept"] == 75 and valid["truncated"] == 0
    assert train["src_unk"] == train["tgt_unk"] == 0
    for entry in [manifest["spm"]["src"], *manifest["text"]["valid"].values()]:
        assert (out / entry).is_file()


def test_round_trip(prepared: tuple[Path, dict], demo: Path) -> None:
    out, _ = prepared
    vocab = Vocab.load(out / "spm.model")
    for split in ("train", "valid"):
        for side in ("src", "tgt"):
            lines = raw(demo / f"{split}.{side}")
            for i in (0, 1, 17, len(lines) // 2, len(lines) - 1):
                assert decoded(out, vocab, split, side, i) == lines[i]


def test_binary_format(prepared: tuple[Path, dict]) -> None:
    out, manifest = prepared
    for split in ("train", "valid"):
        for side in ("src", "tgt"):
            tokens = np.load(out / f"{stem(split)}.{side}.tokens.npy", mmap_mode="r")
            lengths = np.load(out / f"{stem(split)}.{side}.lengths.npy", mmap_mode="r")
            assert isinstance(tokens, np.memmap) and isinstance(lengths, np.memmap)
            assert tokens.dtype == np.uint16 and lengths.dtype == np.uint8  # every sentence < 256 pieces
            assert tokens.ndim == lengths.ndim == 1
            assert len(lengths) == manifest["splits"][split]["kept"]
            assert lengths.sum() == len(tokens) == manifest["splits"][split][f"{side}_pieces"]
            assert lengths.min() > 0
            assert tokens.max() < 300 and tokens.min() > 3  # pieces only: no PAD/UNK/BOS/EOS stored


def test_shards_take_at_most_2_2_bytes_per_token(prepared: tuple[Path, dict]) -> None:
    """Issue 65's disk target: ids and lengths (with their .npy headers) of the training split, per subword token
    (the demo's ~10 pieces a sentence and side; int64 offsets took 2.81)."""
    _, manifest = prepared
    (entry,) = manifest["shards"]["train"]
    tokens = manifest["splits"]["train"]["src_pieces"] + manifest["splits"]["train"]["tgt_pieces"]
    assert 2.0 < sum(entry["bytes"].values()) / tokens <= 2.2


def test_valid_text_is_copied(prepared: tuple[Path, dict], demo: Path) -> None:
    out, _ = prepared
    assert raw(out / "valid.src.txt") == raw(demo / "valid.src")
    assert raw(out / "valid.tgt.txt") == raw(demo / "valid.tgt")


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_filters_empty_pairs_and_truncation_are_counted(demo: Path, tmp_path: Path) -> None:
    src, tgt = raw(demo / "train.src")[:300], raw(demo / "train.tgt")[:300]
    long = " ".join(["The big cat sees the small dog."] * 16)  # 112 words: more than 80 pieces
    src[10], tgt[10] = long, long  # too long on both sides
    src[20], tgt[20] = "", tgt[20]  # empty pairs
    src[21], tgt[21] = src[21], "   "
    src[30], tgt[30] = "The cat sleeps.", " ".join(["The dogs ran quickly."] * 3)  # ratio above 3
    src[40], tgt[40] = "Yes.", "The dogs ran."  # short: exempt from the ratio filter
    marker_src, marker_tgt = src[22], tgt[22]
    v_src, v_tgt = raw(demo / "valid.src")[:20], raw(demo / "valid.tgt")[:20]
    v_src[3], v_tgt[3] = long, v_tgt[3]  # valid: truncated, never dropped
    v_src[5], v_tgt[5] = " ", v_tgt[5]  # valid empty pair: dropped
    files = [
        write_lines(tmp_path / "t.src", src),
        write_lines(tmp_path / "t.tgt", tgt),
        write_lines(tmp_path / "v.src", v_src),
        write_lines(tmp_path / "v.tgt", v_tgt),
    ]
    out = tmp_path / "out"
    manifest = prepare(*files, out, vocab_size=200, max_len=80)
    train, valid = manifest["splits"]["train"], manifest["splits"]["valid"]
    assert (train["read"], train["empty"], train["too_long"], train["bad_ratio"]) == (300, 2, 1, 1)
    assert train["kept"] == 296
    assert (valid["read"], valid["empty"], valid["kept"], valid["truncated"]) == (20, 1, 19, 1)
    # pair 22 (after the two dropped empty pairs and the dropped long pair 10) is kept aligned, at index 19
    vocab = Vocab.load(out / "spm.model")
    assert decoded(out, vocab, "train", "src", 19) == marker_src
    assert decoded(out, vocab, "train", "tgt", 19) == marker_tgt
    assert decoded(out, vocab, "train", "src", 36) == "Yes."
    lengths = np.load(out / "valid.src.lengths.npy")
    assert lengths.max() == 80 == manifest["splits"]["valid"]["max_src_len"] - 1
    kept_valid = [s for s in v_src if s.strip()]
    assert raw(out / "valid.src.txt") == kept_valid
    assert raw(out / "valid.tgt.txt") == [t for s, t in zip(v_src, v_tgt, strict=True) if s.strip()]


def test_separate_vocabularies_and_options(demo: Path, tmp_path: Path) -> None:
    manifest = prepare(*inputs(demo), tmp_path, vocab_size=150, joint=False, model_type="unigram", source_markers=True)
    assert manifest["joint"] is False and manifest["model_type"] == "unigram" and manifest["source_markers"] is True
    assert manifest["spm"] == {"src": "spm.src.model", "tgt": "spm.tgt.model"}
    src_vocab, tgt_vocab = Vocab.load(tmp_path / "spm.src.model"), Vocab.load(tmp_path / "spm.tgt.model")
    assert manifest["src_vocab_size"] == src_vocab.size and manifest["tgt_vocab_size"] == tgt_vocab.size
    # the target-only words are unknown to the source model: "gato" never occurs in source text
    assert "▁gato" not in {src_vocab.piece(i) for i in range(src_vocab.size)}
    assert decoded(tmp_path, tgt_vocab, "train", "tgt", 0) == raw(demo / "train.tgt")[0]
    assert decoded(tmp_path, src_vocab, "train", "src", 0) == raw(demo / "train.src")[0]


def test_deterministic(demo: Path, prepared: tuple[Path, dict], tmp_path: Path) -> None:
    out, _ = prepared
    prepare(*inputs(demo), tmp_path, vocab_size=300)
    for name in ("train.train.00000.src.tokens.npy", "train.train.00000.tgt.lengths.npy", "valid.tgt.tokens.npy"):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes()


def test_refuses_to_overwrite(demo: Path, tmp_path: Path) -> None:
    prepare(*inputs(demo), tmp_path, vocab_size=200)
    with pytest.raises(DataError, match="overwrite") as info:
        prepare(*inputs(demo), tmp_path, vocab_size=200)
    assert info.value.path == str(tmp_path)
    manifest = prepare(*inputs(demo), tmp_path, vocab_size=150, overwrite=True)
    assert json.loads((tmp_path / MANIFEST).read_text())["src_vocab_size"] == manifest["src_vocab_size"] == 150


def test_a_failed_replacement_leaves_the_old_data_set_as_it_was(demo: Path, tmp_path: Path) -> None:
    """--overwrite prepares beside the old data set and swaps it in once complete: bad input found half-way (here
    invalid UTF-8) loses nothing the user had."""
    out = tmp_path / "out"
    prepare(*inputs(demo), out, vocab_size=200)
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    bad_train = tmp_path / "bad.tgt"
    bad_train.write_bytes((demo / "train.tgt").read_bytes().replace(b"\n", b"\xff\n", 1))
    train_src, _, valid_src, valid_tgt = inputs(demo)
    with pytest.raises(DataError) as info:
        prepare(train_src, bad_train, valid_src, valid_tgt, out, vocab_size=200, overwrite=True)
    assert (info.value.path, info.value.line) == (str(bad_train), 1)
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    manifest = prepare(*inputs(demo), out, vocab_size=150, overwrite=True)  # replaced once it is complete
    assert json.loads((out / MANIFEST).read_text()) == manifest and manifest["src_vocab_size"] == 150
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bad.tgt", "out"]  # no folder left beside it


def test_a_folder_of_other_files_or_holding_an_input_is_refused(demo: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "train.important.npy").write_bytes(b"the user's")
    with pytest.raises(DataError, match=r"exists and holds other files \(train.important.npy\), not a prepared"):
        prepare(*inputs(demo), mine, vocab_size=150)
    assert [path.name for path in mine.iterdir()] == ["train.important.npy"]
    out = tmp_path / "out"
    prepare(*inputs(demo), out, vocab_size=150)
    (out / "notes.txt").write_text("mine\n")
    with pytest.raises(DataError, match=r"holds other files than its prepared data set \(notes.txt\)"):
        prepare(*inputs(demo), out, vocab_size=150, overwrite=True)
    (out / "notes.txt").unlink()
    train_src, train_tgt, valid_src, _ = inputs(demo)
    inside = out / "valid.tgt.txt"  # the data set's own validation text as an input of its replacement
    with pytest.raises(DataError, match="an input lies inside the output directory"):
        prepare(train_src, train_tgt, valid_src, inside, out, vocab_size=150, overwrite=True)


def test_missing_input_fails_before_writing(demo: Path, tmp_path: Path) -> None:
    train_src, train_tgt, valid_src, _ = inputs(demo)
    with pytest.raises(DataError, match="file not found") as info:
        prepare(train_src, train_tgt, valid_src, tmp_path / "nope.tgt", tmp_path / "out")
    assert info.value.path == str(tmp_path / "nope.tgt")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fault", ["line counts differ", "every line is empty"])
def test_bad_training_text_leaves_no_folder_behind(demo: Path, tmp_path: Path, fault: str) -> None:
    """Bad training text is found while reading it, after the output folder is made: the folders this call made go
    again (the nested one and its new parent), a folder that was there before stays."""
    bad = tmp_path / "bad.tgt"
    if fault == "line counts differ":
        write_lines(bad, raw(demo / "train.tgt")[:-1])
    else:
        write_lines(bad, [" "] * len(raw(demo / "train.tgt")))
    train_src, _, valid_src, valid_tgt = inputs(demo)
    with pytest.raises(DataError, match=fault):
        prepare(train_src, bad, valid_src, valid_tgt, tmp_path / "out" / "data", vocab_size=200)
    assert not (tmp_path / "out").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    with pytest.raises(DataError, match=fault):
        prepare(train_src, bad, valid_src, valid_tgt, mine, vocab_size=200)
    assert mine.is_dir() and not any(mine.iterdir())


@pytest.mark.parametrize("fault", ["line counts differ", "invalid UTF-8", "no validation pairs left"])
def test_a_bad_validation_set_fails_before_the_subword_model_is_trained(demo: Path, tmp_path: Path,
                                                                        fault: str) -> None:  # fmt: skip
    """The validation files are read whole first: a fault in them costs no subword training nor an output folder."""
    valid_tgt = tmp_path / "bad.tgt"
    lines = raw(demo / "valid.tgt")
    if fault == "line counts differ":
        write_lines(valid_tgt, lines[:-1])
    elif fault == "invalid UTF-8":
        valid_tgt.write_bytes(b"\n".join(line.encode() for line in lines[:5]) + b"\n\xff\n" * (len(lines) - 5))
    else:
        write_lines(valid_tgt, [" "] * len(lines))
    train_src, train_tgt, valid_src, _ = inputs(demo)
    with pytest.raises(DataError, match=fault) as info:
        prepare(train_src, train_tgt, valid_src, valid_tgt, tmp_path / "out", vocab_size=200, spm_sample=1)
    assert info.value.path in (str(valid_src), str(valid_tgt))
    assert not (tmp_path / "out").exists()


def test_bad_options(demo: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="max_ratio"):
        prepare(*inputs(demo), tmp_path, max_ratio=0.5)
    with pytest.raises(DataError, match="model type"):
        prepare(*inputs(demo), tmp_path, model_type="word")


def test_unknown_characters_in_valid_are_unk(demo: Path, tmp_path: Path) -> None:
    v_src = write_lines(tmp_path / "v.src", ["The cat sleeps Ω."])
    v_tgt = write_lines(tmp_path / "v.tgt", ["Lo gato dormet."])
    train_src, train_tgt, _, _ = inputs(demo)
    manifest = prepare(train_src, train_tgt, v_src, v_tgt, tmp_path / "out", vocab_size=200)
    assert manifest["splits"]["valid"]["src_unk"] == 1
    assert UNK in np.load(tmp_path / "out" / "valid.src.tokens.npy").tolist()


@pytest.mark.slow
@needs_multi30k
def test_multi30k(tmp_path: Path) -> None:
    files = [MULTI30K / name for name in ("train.de.gz", "train.en.gz", "val.de.gz", "val.en.gz")]
    manifest = prepare(*files, tmp_path, vocab_size=8000, joint=True)
    train, valid = manifest["splits"]["train"], manifest["splits"]["valid"]
    assert train["read"] == 29000 and train["empty"] == 0 and train["too_long"] == 0
    assert train["kept"] == 29000 - train["bad_ratio"] >= 28990
    assert valid["read"] == valid["kept"] == 1014
    assert manifest["src_vocab_size"] == 8000
    assert len(np.load(tmp_path / "valid.src.lengths.npy", mmap_mode="r")) == 1014
    assert len((tmp_path / "valid.tgt.txt").read_text(encoding="utf-8").splitlines()) == 1014


def test_an_interrupted_prepare_resumes_only_with_the_same_vocabulary_content(tmp_path: Path) -> None:
    """--vocab-from names a model's vocabulary by path: another vocabulary copied there since must not resume the
    shards encoded with the first (they would be mixed, the manifest naming the second)."""
    from adlnmt.data.prepare import _fingerprint

    vocab = tmp_path / "vocab"
    vocab.mkdir()
    (vocab / "spm.model").write_bytes(b"first")
    first = _fingerprint({"vocab_from": str(vocab)}, [], [], vocab)
    assert _fingerprint({"vocab_from": str(vocab)}, [], [], vocab) == first
    (vocab / "spm.model").write_bytes(b"other")
    assert _fingerprint({"vocab_from": str(vocab)}, [], [], vocab) != first


def test_a_mix_of_the_two_forms_of_input_is_named_by_its_flags(demo: Path, tmp_path: Path) -> None:
    from adlnmt.data.prepare import Corpus

    train_src, train_tgt, valid_src, valid_tgt = inputs(demo)
    with pytest.raises(DataError, match=r"give either both --train-src and --train-tgt, or named corpora"):
        prepare(train_src, None, valid_src, valid_tgt, tmp_path / "a")
    two = [Corpus("de-en", Path(train_src), Path(train_tgt)), Corpus("fr-en", Path(train_src), Path(train_tgt))]
    with pytest.raises(DataError, match=r"--valid-src/--valid-tgt with several --train corpora: name the corpus"):
        prepare(None, None, valid_src, valid_tgt, tmp_path / "b", corpora=two)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
