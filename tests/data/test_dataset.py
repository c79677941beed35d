"""Loading a prepared directory, batching (token budget, reproducibility), collation and DDP sharding."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from adlnmt.data.data_dir import MANIFEST, DataDir
from adlnmt.data.dataset import Batch, Split, collate, make_batches, shard
from adlnmt.data.demo import write_demo_corpus
from adlnmt.data.digests import file_digest
from adlnmt.data.prepare import prepare
from adlnmt.data.vocab import BOS, EOS, PAD
from adlnmt.errors import DataError


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    write_demo_corpus(out, size=1500, seed=3)
    return out


def inputs(corpus: Path) -> list[Path]:
    return [corpus / name for name in ("train.src", "train.tgt", "valid.src", "valid.tgt")]


@pytest.fixture(scope="module")
def data_path(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("prepared")
    prepare(*inputs(demo), out, vocab_size=300)
    return out


@pytest.fixture(scope="module")
def data(data_path: Path) -> DataDir:
    return DataDir.load(data_path)


@pytest.fixture(scope="module")
def train(data: DataDir) -> Split:
    return data.split("train")


def test_load(data: DataDir, demo: Path) -> None:
    assert data.manifest["splits"]["train"]["kept"] == 1500
    assert data.src_vocab is data.tgt_vocab
    assert data.src_vocab.size == 300
    assert len(data.split("train")) == 1500 and len(data.split("valid")) == 75
    assert data.split("train") is data.split("train")
    raw = (demo / "valid.tgt").read_text(encoding="utf-8").splitlines()
    assert data.raw_text("valid", "tgt") == data.valid_references() == raw
    valid = data.split("valid")
    assert data.tgt_vocab.decode(valid.tgt(7)) == raw[7]
    sources = data.raw_text("valid", "src")
    assert data.encode_source(sources[7]) == valid.src(7).tolist()
    assert data.encode_source(sources[7], max_len=2) == [*valid.src(7)[:2].tolist(), EOS]


def test_sentences_and_lengths(train: Split, data: DataDir, demo: Path) -> None:
    raw_src = (demo / "train.src").read_text(encoding="utf-8").splitlines()
    for i in (0, 5, 1499):
        src, tgt = train.src(i), train.tgt(i)
        assert src.dtype == tgt.dtype == np.int64
        assert src[-1] == EOS and BOS not in src and EOS not in src[:-1]
        assert BOS not in tgt and EOS not in tgt and PAD not in tgt
        assert train.src_lengths[i] == len(src)
        assert train.tgt_lengths[i] == len(tgt) + 1
        assert data.src_vocab.decode(src) == raw_src[i]
    assert train.src_lengths.dtype == np.int64 and train.src_lengths.shape == (1500,)


def test_source_markers(demo: Path, tmp_path: Path) -> None:
    prepare(*inputs(demo), tmp_path, vocab_size=300, source_markers=True)
    split = DataDir.load(tmp_path).split("train")
    src = split.src(0)
    assert src[0] == BOS and src[-1] == EOS
    assert split.src_lengths[0] == len(src) == len(split.src_pieces(0)) + 2
    batch = collate(split, [0, 1])
    assert torch.all(batch.src[:, 0] == BOS)
    data = DataDir.load(tmp_path)
    assert data.manifest["options"]["source_markers"] is True
    assert data.encode_source(data.raw_text("valid", "src")[4]) == data.split("valid").src(4).tolist()


def test_separate_vocabularies_are_distinct_objects(demo: Path, tmp_path: Path) -> None:
    prepare(*inputs(demo), tmp_path, vocab_size=200, joint=False)
    data = DataDir.load(tmp_path)
    assert data.src_vocab is not data.tgt_vocab


def broken_copy(data_path: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(data_path, copy)
    return copy


def with_offsets(directory: Path, entry: dict) -> None:
    """Replace the ``lengths`` files of a shard by the ``int64`` offsets files of formats 1 and 2 (``entry``, its
    manifest entry, updated in place)."""
    for names in entry["files"].values():
        lengths_name = names.pop("lengths")
        name = lengths_name.replace(".lengths.", ".offsets.")
        lengths = np.load(directory / lengths_name)
        np.save(directory / name, np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]))
        (directory / lengths_name).unlink()
        names["offsets"] = name
        for record in (entry["bytes"], entry["sha256"]):
            del record[lengths_name]
        entry["bytes"][name] = (directory / name).stat().st_size
        entry["sha256"][name] = file_digest(directory / name)


def format_2_copy(data_path: Path, tmp_path: Path) -> Path:
    """A copy laid out as ``prepare`` wrote it in format 2: shards with ``int64`` offsets instead of lengths."""
    copy = broken_copy(data_path, tmp_path)
    manifest = json.loads((copy / MANIFEST).read_text())
    for entries in manifest["shards"].values():
        for entry in entries:
            with_offsets(copy, entry)
    (copy / MANIFEST).write_text(json.dumps({**manifest, "format_version": 2}))
    return copy


def format_1_copy(data_path: Path, tmp_path: Path) -> Path:
    """A copy laid out as ``prepare`` wrote directories before shards (format 1: one array pair per split and side,
    no digests), to test the checks of the arrays themselves and that such directories still load."""
    copy = format_2_copy(data_path, tmp_path)
    manifest = json.loads((copy / MANIFEST).read_text())
    files = {}
    for split, shards in manifest.pop("shards").items():
        (entry,) = shards
        files[split] = {}
        for side, names in entry["files"].items():
            files[split][side] = {}
            for kind, name in names.items():
                (copy / name).rename(copy / f"{split}.{side}.{kind}.npy")
                files[split][side][kind] = f"{split}.{side}.{kind}.npy"
    for key in ("corpora", "options"):
        manifest.pop(key)
    (copy / MANIFEST).write_text(json.dumps({**manifest, "format_version": 1, "files": files}))
    return copy


def test_a_format_1_directory_reads_as_one_shard(data_path: Path, tmp_path: Path) -> None:
    old = DataDir.load(format_1_copy(data_path, tmp_path))
    new = DataDir.load(data_path)
    assert old.corpora() == {"train": {"weight": 1.0, "tag": None, "valid": [0, 75]}}
    assert [s["pairs"] for s in old.shards("train")] == [1500]
    for split in ("train", "valid"):
        a, b = old.split(split), new.split(split)
        assert len(a) == len(b) and all(np.array_equal(a.src(i), b.src(i)) for i in (0, 9, len(a) - 1))


def test_a_format_2_directory_reads_as_it_is(data_path: Path, tmp_path: Path) -> None:
    old, new = DataDir.load(format_2_copy(data_path, tmp_path)), DataDir.load(data_path)
    assert old.manifest["format_version"] == 2 and new.manifest["format_version"] == 3
    for split in ("train", "valid"):
        a, b = old.split(split), new.split(split)
        for side in ("src", "tgt"):
            assert all(np.array_equal(x, y) for x, y in zip(a.arrays(side), b.arrays(side), strict=True))
        assert np.array_equal(a.src_lengths, b.src_lengths) and np.array_equal(a.tgt(9), b.tgt(9))


def test_missing_and_corrupt_directories(data_path: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found") as info:
        DataDir.load(tmp_path / "absent")
    assert info.value.path == str(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no manifest") as info:
        DataDir.load(tmp_path / "empty")
    assert info.value.path == str(tmp_path / "empty" / MANIFEST)

    copy = broken_copy(data_path, tmp_path)
    (copy / MANIFEST).write_text('{\n  "format_version": 1,\n  oops\n}\n')
    with pytest.raises(DataError, match="invalid JSON") as info:
        DataDir.load(copy)
    assert (info.value.path, info.value.line) == (str(copy / MANIFEST), 3)

    manifest = json.loads((data_path / MANIFEST).read_text())
    (copy / MANIFEST).write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(DataError, match="format version 99 \\(expected one of 1, 2, 3\\)"):
        DataDir.load(copy)

    (copy / MANIFEST).write_text(json.dumps(manifest))
    (copy / "spm.model").unlink()
    with pytest.raises(DataError, match="sentencepiece model not found") as info:
        DataDir.load(copy)
    assert info.value.path == str(copy / "spm.model")


def test_missing_and_corrupt_arrays(data_path: Path, tmp_path: Path) -> None:
    copy = format_1_copy(data_path, tmp_path)
    (copy / "train.tgt.tokens.npy").unlink()
    data = DataDir.load(copy)  # arrays are only opened when a split is used
    with pytest.raises(DataError, match="missing") as info:
        data.split("train")
    assert info.value.path == str(copy / "train.tgt.tokens.npy")

    (copy / "valid.src.tokens.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(DataError, match="corrupt") as info:
        data.split("valid")
    assert info.value.path == str(copy / "valid.src.tokens.npy")
    with pytest.raises(DataError, match="no split 'test'"):
        data.split("test")


def test_inconsistent_offsets(data_path: Path, tmp_path: Path) -> None:
    copy = format_1_copy(data_path, tmp_path)
    offsets = np.load(copy / "train.src.offsets.npy")
    np.save(copy / "train.src.offsets.npy", offsets[:-1])
    with pytest.raises(DataError, match="offsets do not describe") as info:
        DataDir.load(copy).split("train")
    assert info.value.path == str(copy / "train.src.offsets.npy")
    tokens = np.load(copy / "train.src.tokens.npy")
    np.save(copy / "train.src.tokens.npy", tokens[: offsets[-2]])
    with pytest.raises(DataError, match="the manifest says 1500"):
        DataDir.load(copy).split("train")


def resign(copy: Path, name: str) -> None:
    """Record the size and digest of the file ``name`` in the manifest of ``copy``, as though prepare wrote it."""
    manifest = json.loads((copy / MANIFEST).read_text())
    for entries in manifest["shards"].values():
        for entry in entries:
            if name in entry["bytes"]:
                entry["bytes"][name], entry["sha256"][name] = (copy / name).stat().st_size, file_digest(copy / name)
    (copy / MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda n: np.concatenate([n[:-2], [n[-2] + n[-1]]]), "holds 1499 sentences, the manifest says 1500"),
        (lambda n: np.concatenate([n[:-1], [n[-1] + 1]]), r"the lengths sum to \d+ tokens, .*src.tokens.npy holds"),
        (lambda n: n.astype(np.int64), "expected a 1-d array of unsigned integer lengths, found int64"),
    ],
)
def test_lengths_that_do_not_describe_the_tokens(data_path: Path, tmp_path: Path, damage, message: str) -> None:
    """Lengths that pass the digest check (written as prepare would) but do not fit the tokens: named errors."""
    copy = broken_copy(data_path, tmp_path)
    name = "train.train.00000.src.lengths.npy"
    np.save(copy / name, damage(np.load(copy / name)))
    resign(copy, name)
    with pytest.raises(DataError, match=message) as info:
        DataDir.load(copy).split("train")
    assert info.value.path == str(copy / name)


def test_every_sentence_once_and_budget_respected(train: Split) -> None:
    batches = make_batches(train, batch_tokens=400, seed=1, epoch=0)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(len(train)))
    for batch in batches:
        width = max(train.src_lengths[batch].max(), train.tgt_lengths[batch].max())
        assert width * len(batch) <= 400 or len(batch) == 1
        padded = collate(train, batch)
        assert padded.src.numel() <= 400 and padded.tgt_in.numel() <= 400
    assert len(batches) < len(train) / 5  # batches are full-ish, not singletons


def test_oversized_sentences_get_their_own_batch(train: Split) -> None:
    batches = make_batches(train, batch_tokens=8, seed=0, epoch=0)
    assert all(len(b) == 1 for b in batches if max(train.src_lengths[b].max(), train.tgt_lengths[b].max()) > 8)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(train)))


def test_batches_are_reproducible_and_vary_by_epoch_and_seed(train: Split) -> None:
    def key(batches: list[np.ndarray]) -> list[list[int]]:
        return [b.tolist() for b in batches]

    first = make_batches(train, 500, seed=3, epoch=2)
    assert key(first) == key(make_batches(train, 500, seed=3, epoch=2))
    assert key(first) != key(make_batches(train, 500, seed=3, epoch=3))
    assert key(first) != key(make_batches(train, 500, seed=4, epoch=2))
    # within a batch, sentences have similar lengths (length bucketing)
    spreads = [np.ptp(train.tgt_lengths[b]) for b in first]
    assert np.median(spreads) <= 1


def test_mixed_length_batches_keep_the_budget_and_mix_lengths(train: Split) -> None:
    mixed = make_batches(train, 500, seed=3, epoch=2, mixed_lengths=True)
    assert sorted(np.concatenate(mixed).tolist()) == list(range(len(train)))
    assert all(max(train.src_lengths[b].max(), train.tgt_lengths[b].max()) * len(b) <= 500 or len(b) == 1
               for b in mixed)  # fmt: skip
    assert [b.tolist() for b in mixed] == [b.tolist() for b in make_batches(train, 500, 3, 2, mixed_lengths=True)]
    spreads = [np.ptp(train.tgt_lengths[b]) for b in mixed if len(b) > 1]
    assert np.median(spreads) >= 5  # lengths mixed within a batch (length-bucketed batches: at most 1)


def test_unshuffled_batches_are_length_sorted(train: Split) -> None:
    batches = make_batches(train, 500, seed=0, epoch=0, shuffle=False)
    order = np.concatenate(batches)
    assert np.all(np.diff(train.tgt_lengths[order]) >= 0)
    again = make_batches(train, 500, seed=9, epoch=5, shuffle=False)  # seed and epoch play no part
    assert [b.tolist() for b in batches] == [b.tolist() for b in again]


def test_shard_gives_every_rank_the_same_number(train: Split) -> None:
    batches = make_batches(train, 300, seed=0, epoch=1)
    world = 3
    shards = [shard(batches, rank, world) for rank in range(world)]
    assert len({len(s) for s in shards}) == 1
    assert len(shards[0]) == len(batches) // world
    used = [b.tolist() for s in shards for b in s]
    assert len(used) == len({tuple(b) for b in used}) == world * (len(batches) // world)
    assert len(batches) % world == len(batches) - len(used)  # only the remainder is dropped
    assert [b.tolist() for b in shard(batches, 0, 1)] == [b.tolist() for b in batches]
    with pytest.raises(ValueError, match="rank"):
        shard(batches, 3, 3)
    with pytest.raises(ValueError, match="ranks"):
        shard(batches[:2], 0, 3)


def test_collate(train: Split) -> None:
    indices = np.array([3, 10, 200, 7])
    batch = collate(train, indices)
    assert isinstance(batch, Batch) and len(batch) == 4
    src_len, tgt_len = train.src_lengths[indices], train.tgt_lengths[indices]
    assert batch.src.shape == (4, src_len.max()) and batch.src.dtype == torch.long
    assert batch.tgt_in.shape == batch.tgt_out.shape == (4, tgt_len.max())
    assert batch.indices.tolist() == indices.tolist()
    for row, i in enumerate(indices):
        src, tgt = train.src(i), train.tgt(i)
        assert batch.src[row, : len(src)].tolist() == src.tolist()
        assert torch.all(batch.src[row, len(src) :] == PAD)
        assert batch.tgt_in[row, : len(tgt) + 1].tolist() == [BOS, *tgt.tolist()]
        assert batch.tgt_out[row, : len(tgt) + 1].tolist() == [*tgt.tolist(), EOS]
        assert torch.all(batch.tgt_in[row, len(tgt) + 1 :] == PAD)
        assert torch.all(batch.tgt_out[row, len(tgt) + 1 :] == PAD)
    assert batch.src_tokens == int((batch.src != PAD).sum()) == src_len.sum()
    assert batch.tgt_tokens == int((batch.tgt_out != PAD).sum()) == tgt_len.sum()
    assert batch.src_lengths.tolist() == src_len.tolist() and batch.tgt_lengths.tolist() == tgt_len.tolist()
    moved = batch.to("cpu")
    assert torch.equal(moved.tgt_out, batch.tgt_out) and moved.tgt_tokens == batch.tgt_tokens
