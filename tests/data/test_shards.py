"""Streaming ``prepare`` (issue 65): shards equal to one pass in one process, workers, the sentencepiece sample, an
interrupted prepare continued or started clean, several corpora, target-language tags, and every bad input."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adlnmt.cli import main
from adlnmt.data import prepare as prepare_module
from adlnmt.data import shards as shards_module
from adlnmt.data.data_dir import MANIFEST, DataDir
from adlnmt.data.dataset import Split
from adlnmt.data.demo import write_demo_corpus
from adlnmt.data.prepare import STATE, Corpus, parse_corpus, prepare, reservoir_sample
from adlnmt.data.vocab import Vocab, train_sentencepiece
from adlnmt.errors import DataError, UserError

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    write_demo_corpus(out, size=2000, seed=5)
    return out


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def write_lines(path: Path, items: list[str]) -> Path:
    path.write_text("".join(item + "\n" for item in items), encoding="utf-8")
    return path


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepare_module, "CHUNK_PAIRS", 150)  # shard boundaries come at chunk ends


def files_of(demo: Path) -> dict[str, Path]:
    return {"train_src": demo / "train.src", "train_tgt": demo / "train.tgt",
            "valid_src": demo / "valid.src", "valid_tgt": demo / "valid.tgt"}  # fmt: skip


def shard_pairs(data: DataDir) -> list[tuple[list[int], list[int]]]:
    """Every training pair of a data directory, shard after shard."""
    pairs = []
    for index in range(len(data.shards("train"))):
        split = data.open_shard("train", index)
        pairs += [(split.src(i).tolist(), split.tgt(i).tolist()) for i in range(len(split))]
    return pairs


def test_shards_hold_what_one_shard_holds(demo: Path, tmp_path: Path, small_chunks: None) -> None:
    one = prepare(**files_of(demo), out_dir=tmp_path / "one", vocab_size=200)
    many = prepare(**files_of(demo), out_dir=tmp_path / "many", vocab_size=200, shard_size=400)
    assert [s["pairs"] for s in many["shards"]["train"]] == [450, 450, 450, 450, 200]
    assert one["splits"] == many["splits"]
    assert shard_pairs(DataDir.load(tmp_path / "one")) == shard_pairs(DataDir.load(tmp_path / "many"))
    for entry in many["shards"]["train"]:
        lengths = np.load(tmp_path / "many" / entry["files"]["src"]["lengths"])
        tokens = np.load(tmp_path / "many" / entry["files"]["src"]["tokens"])
        assert len(lengths) == entry["pairs"] and lengths.sum() == len(tokens) == entry["src_pieces"]
        assert tokens.dtype == np.uint16 and lengths.dtype == np.uint8 and lengths.min() > 0


@pytest.mark.parametrize(("longest", "dtype"), [(255, np.uint8), (256, np.uint16), (65_535, np.uint16),
                                                (65_536, np.uint32)])  # fmt: skip
def test_lengths_take_the_narrowest_type_and_read_back(tmp_path: Path, longest: int, dtype: type) -> None:
    assert shards_module.length_dtype(longest) == np.dtype(dtype)
    lengths = np.array([3, longest, 1], np.int64)
    ids = np.arange(int(lengths.sum())) % 50 + 4
    builder = shards_module.ShardBuilder(np.dtype(np.uint16))
    builder.add({"src": ids, "tgt": ids[::-1].copy()}, {"src": lengths, "tgt": lengths})
    entry = builder.write(tmp_path, "train.x.00000")
    assert entry["files"]["src"] == {
        "tokens": "train.x.00000.src.tokens.npy",
        "lengths": "train.x.00000.src.lengths.npy",
    }
    assert np.load(tmp_path / entry["files"]["tgt"]["lengths"]).dtype == dtype
    split = Split("train", tmp_path, entry["files"], False, 3, {"src": 60, "tgt": 60})
    assert split.src_pieces(1).tolist() == ids[3 : 3 + longest].tolist() and split.tgt_pieces(2).tolist() == [ids[0]]
    assert split.src_lengths.tolist() == [4, longest + 1, 2] and split.arrays("src")[1].tolist() == [
        0,
        3,
        longest + 3,
        longest + 4,
    ]


@pytest.mark.slow
def test_two_workers_write_the_same_bytes_as_one(demo: Path, tmp_path: Path, small_chunks: None) -> None:
    common = {**files_of(demo), "vocab_size": 200, "shard_size": 700}
    prepare(**common, out_dir=tmp_path / "w1")
    prepare(**common, out_dir=tmp_path / "w2", workers=2)
    names = sorted(p.name for p in (tmp_path / "w1").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "w2").iterdir())
    for name in names:
        if name.endswith(".npy") or name.endswith(".txt"):
            assert (tmp_path / "w1" / name).read_bytes() == (tmp_path / "w2" / name).read_bytes(), name


def test_shards_do_not_depend_on_the_blocks_read(demo: Path, tmp_path: Path, small_chunks: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Shards end at multiples of CHUNK_PAIRS non-blank pairs, whatever the blocks of lines the workers encode (here
    smaller than a chunk and straddling chunk ends), with blank, too long and badly proportioned pairs among them."""
    src, tgt = lines(demo / "train.src"), lines(demo / "train.tgt")
    for i in range(0, len(src), 37):
        src[i] = " " if i % 2 else " ".join([src[i]] * 5)  # blank, or a ratio above 3
    files = {**files_of(demo), "train_src": write_lines(tmp_path / "t.src", src),
             "train_tgt": write_lines(tmp_path / "t.tgt", tgt)}  # fmt: skip
    common = {**files, "vocab_size": 200, "shard_size": 300, "max_len": 60}
    big = prepare(**common, out_dir=tmp_path / "big")
    assert big["splits"]["train"]["bad_ratio"] > 0 and big["splits"]["train"]["empty"] > 0
    monkeypatch.setattr(prepare_module, "BLOCK_LINES", 64)
    small = prepare(**common, out_dir=tmp_path / "small")
    assert small["splits"] == big["splits"] and len(big["shards"]["train"]) > 2
    assert [s["sha256"] for s in small["shards"]["train"]] == [s["sha256"] for s in big["shards"]["train"]]


@pytest.mark.slow
def test_worker_errors_come_in_the_order_of_the_lines(demo: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Invalid UTF-8 that a worker finds comes before a line-count mismatch found later by the reader."""
    monkeypatch.setattr(prepare_module, "BLOCK_LINES", 20)  # 4 blocks: all in flight when the reader ends
    raw = (demo / "valid.src").read_bytes().splitlines(keepends=True)
    raw[25] = b"\xff" + raw[25]
    bad = tmp_path / "valid.src"
    bad.write_bytes(b"".join(raw) + b"one more\n")
    with pytest.raises(DataError) as info:
        prepare(**{**files_of(demo), "valid_src": bad}, out_dir=tmp_path / "d", vocab_size=200, workers=2)
    assert (info.value.path, info.value.line, info.value.message) == (
        str(bad),
        26,
        "invalid UTF-8 (byte 1 of the line)",
    )


def test_the_reservoir_is_all_in_order_or_a_seeded_uniform_sample(demo: Path) -> None:
    corpus = [Corpus("train", demo / "train.src", demo / "train.tgt")]
    every = list(zip(lines(demo / "train.src"), lines(demo / "train.tgt"), strict=True))
    assert reservoir_sample(corpus, 5000) == every
    sample = reservoir_sample(corpus, 300)
    assert len(sample) == 300 and sample == reservoir_sample(corpus, 300)
    positions = [every.index(pair) for pair in sample]
    assert positions == sorted(positions)  # corpus order
    assert 700 < np.mean(positions) < 1300  # drawn from the whole corpus, not its start (uniform: mean 1000)
    assert reservoir_sample(corpus, 300, seed=2) != sample


def test_sentencepiece_trains_on_the_sample(demo: Path, tmp_path: Path) -> None:
    manifest = prepare(**files_of(demo), out_dir=tmp_path / "d", vocab_size=200, spm_sample=50)
    assert manifest["options"]["spm_sample"] == 50 and manifest["splits"]["train"]["kept"] == 2000
    sample = reservoir_sample([Corpus("train", demo / "train.src", demo / "train.tgt")], 50)
    direct = train_sentencepiece((line for pair in sample for line in pair), tmp_path / "direct", 200)
    pieces = [Vocab.load(path).pieces(list(range(200))) for path in (tmp_path / "d" / "spm.model", direct)]
    assert pieces[0] == pieces[1]
    prepare(**files_of(demo), out_dir=tmp_path / "f", vocab_size=200)
    assert Vocab.load(tmp_path / "f" / "spm.model").pieces(list(range(200))) != pieces[0]


PREPARE_SCRIPT = """
import os, signal, sys
from pathlib import Path
from adlnmt.data import prepare as p, shards
p.CHUNK_PAIRS = 150
demo, out, kill_at = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
save = shards._save
def save_or_die(path, values):
    save(path, values)
    if kill_at and kill_at in path.name:  # written, not yet renamed into place
        os.kill(os.getpid(), signal.SIGKILL)
shards._save = save_or_die
p.prepare(demo / "train.src", demo / "train.tgt", demo / "valid.src", demo / "valid.tgt", out, vocab_size=200,
          shard_size=400)
"""


def prepare_in_subprocess(demo: Path, out: Path, kill_at: str = "") -> subprocess.CompletedProcess[str]:
    """``prepare`` in a process of its own that kills itself (SIGKILL) when it has written the file ``kill_at``."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-c", PREPARE_SCRIPT, str(demo), str(out), kill_at]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_a_killed_prepare_is_not_accepted_and_the_rerun_continues(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    killed = prepare_in_subprocess(demo, out, "train.train.00002.src.tokens.npy")
    assert killed.returncode == -9
    assert not (out / MANIFEST).exists() and (out / STATE).is_file()
    with pytest.raises(DataError, match="no manifest"):
        DataDir.load(out)
    first = out / "train.train.00000.src.tokens.npy"
    before = first.stat().st_mtime_ns, first.stat().st_ino
    assert prepare_in_subprocess(demo, out).returncode == 0
    assert (first.stat().st_mtime_ns, first.stat().st_ino) == before  # continued: shard 0 was not written again
    assert not (out / STATE).exists()
    straight = tmp_path / "straight"
    assert prepare_in_subprocess(demo, straight).returncode == 0
    resumed, fresh = (json.loads((d / MANIFEST).read_text()) for d in (out, straight))
    assert resumed["splits"] == fresh["splits"] and resumed["shards"] == fresh["shards"]


def full_disk_at(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Writing a shard file whose name holds ``name`` fails as on a full disk."""
    save = shards_module._save

    def save_or_fail(path: Path, values: np.ndarray) -> None:
        if name in path.name and "valid" not in path.name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        save(path, values)

    monkeypatch.setattr(shards_module, "_save", save_or_fail)


def test_an_interrupted_prepare_with_other_options_starts_clean(demo: Path, tmp_path: Path, small_chunks: None,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    out = tmp_path / "out"
    full_disk_at(monkeypatch, "train.train.00003.src.tokens.npy")
    with pytest.raises(UserError, match="No space left on device"):
        prepare(**files_of(demo), out_dir=out, vocab_size=200, shard_size=400)
    assert not (out / MANIFEST).exists() and (out / "train.train.00002.src.tokens.npy").is_file()
    monkeypatch.undo()
    monkeypatch.setattr(prepare_module, "CHUNK_PAIRS", 150)
    manifest = prepare(**files_of(demo), out_dir=out, vocab_size=200, shard_size=1000)
    assert [s["pairs"] for s in manifest["shards"]["train"]] == [1050, 950]
    assert sorted(p.name for p in out.glob("train.*.src.tokens.npy")) == [
        "train.train.00000.src.tokens.npy", "train.train.00001.src.tokens.npy"]  # fmt: skip


def test_an_interrupted_prepare_of_another_format_starts_clean(demo: Path, tmp_path: Path, small_chunks: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Shards written by an older adlnmt (format 2: offsets) are never continued with shards of this format."""
    out = tmp_path / "out"
    monkeypatch.setattr(prepare_module, "FORMAT_VERSION", 2)
    full_disk_at(monkeypatch, "train.train.00002.src.tokens.npy")
    with pytest.raises(UserError, match="No space left on device"):
        prepare(**files_of(demo), out_dir=out, vocab_size=200, shard_size=400)
    monkeypatch.undo()
    monkeypatch.setattr(prepare_module, "CHUNK_PAIRS", 150)
    written, save = [], shards_module._save
    monkeypatch.setattr(shards_module, "_save", lambda path, values: (written.append(path.name), save(path, values)))
    prepare(**files_of(demo), out_dir=out, vocab_size=200, shard_size=400)
    assert any(name.startswith(".train.train.00000.src.tokens.npy") for name in written)  # written again


def test_a_full_disk_writing_shards_is_one_error_and_no_manifest(demo: Path, tmp_path: Path, capsys,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    full_disk_at(monkeypatch, ".tokens.npy")
    f = files_of(demo)
    argv = ["prepare", "--train-src", str(f["train_src"]), "--train-tgt", str(f["train_tgt"]),
            "--valid-src", str(f["valid_src"]), "--valid-tgt", str(f["valid_tgt"]), "--out", str(tmp_path / "o"),
            "--vocab-size", "200"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.train.00000.src.tokens.npy: cannot write (No space left on device)" in err[0]
    assert not (tmp_path / "o" / MANIFEST).exists()


# --- damaged shards ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sharded(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sharded")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prepare_module, "CHUNK_PAIRS", 150)
        prepare(**files_of(demo), out_dir=out, vocab_size=200, shard_size=900)
    return out


def damaged(sharded: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(sharded, copy)
    return copy


@pytest.mark.parametrize("kind", ["tokens", "lengths"])
def test_a_missing_shard_is_named(sharded: Path, tmp_path: Path, kind: str) -> None:
    copy = damaged(sharded, tmp_path)
    (copy / f"train.train.00001.tgt.{kind}.npy").unlink()
    data = DataDir.load(copy)
    data.open_shard("train", 0)
    with pytest.raises(DataError, match="shard file missing") as info:
        data.open_shard("train", 1)
    assert info.value.path == str(copy / f"train.train.00001.tgt.{kind}.npy")


@pytest.mark.parametrize("kind", ["tokens", "lengths"])
def test_a_truncated_shard_is_named(sharded: Path, tmp_path: Path, kind: str) -> None:
    copy = damaged(sharded, tmp_path)
    path = copy / f"train.train.00000.src.{kind}.npy"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DataError, match="truncated") as info:
        DataDir.load(copy).open_shard("train", 0)
    assert info.value.path == str(path)


@pytest.mark.parametrize("kind", ["tokens", "lengths"])
def test_a_foreign_shard_is_named(sharded: Path, tmp_path: Path, kind: str) -> None:
    copy = damaged(sharded, tmp_path)
    a, b = copy / f"train.train.00000.tgt.{kind}.npy", copy / f"train.train.00001.tgt.{kind}.npy"
    values = np.load(b)
    values[: len(np.load(a))] = 7
    np.save(a, values[: len(np.load(a))])  # same size, other content
    with pytest.raises(DataError, match="digest") as info:
        DataDir.load(copy).open_shard("train", 0)
    assert info.value.path == str(a)


def test_a_split_of_several_shards_is_read_shard_by_shard(sharded: Path) -> None:
    data = DataDir.load(sharded)
    with pytest.raises(DataError, match="has 3 shards"):
        data.split("train")
    assert len(data.split("valid")) == 100


# --- bad input -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("de-en=a,b:0", "weight must be a positive number"),
        ("de-en=a,b:-2", "weight must be a positive number"),
        ("de-en=a,b:nan", "weight must be a positive number"),
        ("de-en=a,b:x", "weight 'x' is not a number"),
        ("de-en=a", "expects NAME=SRC,TGT"),
        ("a,b", "expects NAME=SRC,TGT"),
        ("d/e=a,b", "may hold only letters"),
        ("de-en=a,b,c", "expected two files"),
    ],
)
def test_bad_corpus_flags(text: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        parse_corpus(text)


def test_a_corpus_flag_with_a_weight(tmp_path: Path) -> None:
    assert parse_corpus("de-en=a.de,b.en:2.5") == Corpus("de-en", Path("a.de"), Path("b.en"), 2.5)
    assert parse_corpus("x=c:/a,c:/b").src == Path("c:/a")  # no weight: a colon inside a path stays in it


def test_a_weight_where_none_goes_is_named(demo: Path) -> None:
    """A weight on --valid (NAME=SRC,TGT:0.5) or a second weight was reported as "valid.tgt:0.5: file not found",
    which reads as file:line (valid.tgt missing)."""
    src, tgt = demo / "valid.src", demo / "valid.tgt"
    with pytest.raises(DataError) as info:
        parse_corpus(f"x={src},{tgt}:0.5", "--valid", weighted=False)
    assert str(info.value) == f"--valid x: no file '{tgt}:0.5', but {tgt} followed by ':0.5' (a validation set " \
        "takes no weight)"  # fmt: skip
    with pytest.raises(DataError) as info:
        parse_corpus(f"x={src},{tgt}:1:2")
    assert "followed by ':1' (one weight per corpus, after TGT)" in str(info.value)
    assert parse_corpus(f"x={src},{tgt}:2").weight == 2.0


def test_an_unknown_or_repeated_corpus_name(demo: Path, tmp_path: Path, capsys) -> None:
    train, valid = f"{demo}/train.src,{demo}/train.tgt", f"{demo}/valid.src,{demo}/valid.tgt"
    argv = ["prepare", "--train", f"de-en={train}", "--valid", f"fr-en={valid}", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert "--valid names the unknown corpus 'fr-en' (training corpora: de-en)" in capsys.readouterr().err
    argv = ["prepare", "--train", f"de-en={train}", "--train", f"de-en={train}", "--valid", f"de-en={valid}",
            "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 2
    assert "training corpus 'de-en' given twice" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_corpus_names_differing_only_in_case_are_refused(demo: Path, tmp_path: Path, capsys) -> None:
    """de-en and DE-EN were two corpora whose shard files are one file on a case-insensitive file system."""
    train, valid = f"{demo}/train.src,{demo}/train.tgt", f"{demo}/valid.src,{demo}/valid.tgt"
    argv = ["prepare", "--train", f"de-en={train}", "--train", f"DE-EN={train}", "--valid", f"de-en={valid}",
            "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 2
    assert "training corpus names 'de-en' and 'DE-EN' differ only in case" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("kind", "named"), [("train", True), ("valid", True), ("train", False), ("valid", False)])
def test_one_file_as_source_and_target_is_refused(demo: Path, tmp_path: Path, capsys, kind: str, named: bool) -> None:
    """A corpus whose source and target are one file (however spelled) was prepared without a word."""
    files = {side: [demo / f"{side}.src", demo / f"{side}.tgt"] for side in ("train", "valid")}
    files[kind][1] = demo.parent / demo.name / ".." / demo.name / f"{kind}.src"
    if named:
        argv = [arg for side, (src, tgt) in files.items() for arg in (f"--{side}", f"de-en={src},{tgt}")]
    else:
        argv = [arg for side, (src, tgt) in files.items() for arg in (f"--{side}-src", src, f"--{side}-tgt", tgt)]
    assert main(["prepare", *map(str, argv), "--out", str(tmp_path / "o")]) == 2
    given = f"--{kind} de-en" if named else f"--{kind}-src and --{kind}-tgt"
    assert f"{given}: source and target are the same file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_invalid_utf8_and_mismatched_lines_in_a_named_corpus(demo: Path, tmp_path: Path) -> None:
    src = lines(demo / "train.src")
    bad = tmp_path / "bad.src"
    bad.write_bytes(("\n".join(src[:40]) + "\n").encode() + b"caf\xe9\n" + ("\n".join(src[41:]) + "\n").encode())
    valid = [Corpus("a-b", demo / "valid.src", demo / "valid.tgt")]
    with pytest.raises(DataError, match="invalid UTF-8") as info:
        prepare(out_dir=tmp_path / "o", corpora=[Corpus("a-b", bad, demo / "train.tgt")], valid=valid)
    assert (info.value.path, info.value.line) == (str(bad), 41)
    short = write_lines(tmp_path / "short.tgt", lines(demo / "train.tgt")[:-3])
    with pytest.raises(DataError, match="line counts differ") as info:
        prepare(out_dir=tmp_path / "o", corpora=[Corpus("a-b", demo / "train.src", short)], valid=valid)
    assert (info.value.path, info.value.line) == (str(demo / "train.src"), 1998)
    assert not (tmp_path / "o" / MANIFEST).exists()


def test_xz_input(demo: Path, tmp_path: Path) -> None:
    import lzma

    for side in ("src", "tgt"):
        (tmp_path / f"t.{side}.xz").write_bytes(lzma.compress((demo / f"train.{side}").read_bytes()))
    manifest = prepare(tmp_path / "t.src.xz", tmp_path / "t.tgt.xz", demo / "valid.src", demo / "valid.tgt",
                       tmp_path / "o", vocab_size=200)  # fmt: skip
    assert manifest["splits"]["train"]["kept"] == 2000


# --- several corpora and language tags --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def multilingual(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("multi")
    src, tgt = lines(demo / "train.src"), lines(demo / "train.tgt")
    corpora, valid = [], []
    for name, part in (("de-en", slice(0, 1200)), ("fr-en", slice(1200, 2000))):
        files = write_lines(root / f"{name}.src", src[part]), write_lines(root / f"{name}.tgt", tgt[part])
        corpora.append(Corpus(name, *files, 3.0 if name == "fr-en" else 1.0))
    valid.append(Corpus("fr-en", demo / "valid.src", demo / "valid.tgt"))
    v_src, v_tgt = lines(demo / "valid.src")[:30], lines(demo / "valid.tgt")[:30]
    valid.append(Corpus("de-en", write_lines(root / "v.src", v_src), write_lines(root / "v.tgt", v_tgt)))
    manifest = prepare(out_dir=root / "data", corpora=corpora, valid=valid, target_tags=True, vocab_size=200)
    return root / "data", manifest


def test_several_corpora_with_weights_and_valid_ranges(multilingual: tuple[Path, dict]) -> None:
    path, manifest = multilingual
    data = DataDir.load(path)
    corpora = data.corpora()
    assert list(corpora) == ["de-en", "fr-en"]
    assert (corpora["de-en"]["weight"], corpora["fr-en"]["weight"]) == (1.0, 3.0)
    assert corpora["de-en"]["train"]["kept"] == 1200 and corpora["fr-en"]["train"]["kept"] == 800
    assert corpora["fr-en"]["valid"] == [0, 100] and corpora["de-en"]["valid"] == [100, 130]
    assert [s["corpus"] for s in data.shards("train")] == ["de-en", "fr-en"]
    assert manifest["splits"]["train"]["kept"] == 2000 and len(data.split("valid")) == 130


def test_target_tags_are_one_id_first_in_every_source(multilingual: tuple[Path, dict], demo: Path) -> None:
    data = DataDir.load(multilingual[0])
    vocab = data.src_vocab
    tag = vocab.tag_id("<2en>")
    assert tag is not None and vocab.piece(tag) == "<2en>" and tag == 4  # right after the special ids
    assert vocab.tag_id("<2xx>") is None
    for index in range(len(data.shards("train"))):
        split = data.open_shard("train", index)
        assert all(split.src_pieces(i)[0] == tag for i in range(len(split)))
        assert all(tag not in split.src_pieces(i)[1:] for i in range(len(split)))
    first = lines(demo / "train.src")[0]
    assert vocab.encode(f"<2en> {first}") == [tag, *vocab.encode(first)]
    assert data.open_shard("train", 0).src_pieces(0).tolist() == vocab.encode(f"<2en> {first}")
    valid = data.split("valid")
    assert data.encode_source(f"<2en> {data.raw_text('valid', 'src')[0]}") == valid.src(0).tolist()


def test_target_tags_with_the_vocabulary_of_a_model_trained_with_them(
    multilingual: tuple[Path, dict], demo: Path, tmp_path: Path
) -> None:
    """Fine-tuning a model trained with --target-tags: prepare --vocab-from it --target-tags was refused ("a model's
    vocabulary holds no tags it was not trained with") even though it holds them; now only a tag it lacks is."""
    vocab_dir = multilingual[0]  # as a model's vocab/: manifest.json beside the sentencepiece models
    files = {"train": (demo / "train.src", demo / "train.tgt"), "valid": (demo / "valid.src", demo / "valid.tgt")}
    manifest = prepare(out_dir=tmp_path / "ft", corpora=[Corpus("de-en", *files["train"])],
                       valid=[Corpus("de-en", *files["valid"])], target_tags=True, vocab_from=vocab_dir)  # fmt: skip
    data = DataDir.load(tmp_path / "ft")
    tag = data.src_vocab.tag_id("<2en>")
    assert tag is not None and manifest["corpora"]["de-en"]["tag"] == "<2en>"
    assert data.open_shard("train", 0).src_pieces(0)[0] == tag and data.split("valid").src(0)[0] == tag
    with pytest.raises(DataError, match=r"source vocabulary has no <2cs> \(.*; it has <2en>\)"):
        prepare(out_dir=tmp_path / "cs", corpora=[Corpus("de-cs", *files["train"])],
                valid=[Corpus("de-cs", *files["valid"])], target_tags=True, vocab_from=vocab_dir)  # fmt: skip
    assert not (tmp_path / "cs").exists()


def test_a_source_line_that_starts_with_a_tag_is_encoded_as_translate_reads_it(
    multilingual: tuple[Path, dict], demo: Path, tmp_path: Path
) -> None:
    """Data for a model trained with --target-tags whose lines carry their tag (prepare --vocab-from MODEL): prepare
    encoded "<2en> text" as [▁, <2en>, …], translate as [<2en>, …]."""
    from adlnmt.data.language_codes import SourceEncoder

    vocab = DataDir.load(multilingual[0]).src_vocab
    first = lines(demo / "train.src")[0]
    texts = [f"<2en> {first}", first, f"<2xx> {first}"]
    assert SourceEncoder(vocab).batch(texts) == [vocab.encode(text) for text in texts]
    assert SourceEncoder(vocab).batch(texts)[0][0] == vocab.tag_id("<2en>")
    tagged = write_lines(tmp_path / "tagged.src", [f"<2en> {line}" for line in lines(demo / "train.src")[:50]])
    head = write_lines(tmp_path / "head.tgt", lines(demo / "train.tgt")[:50])
    prepare(out_dir=tmp_path / "ft", corpora=[Corpus("train", tagged, head)], valid=[Corpus("train", tagged, head)],
            vocab_from=multilingual[0])  # fmt: skip
    assert DataDir.load(tmp_path / "ft").open_shard("train", 0).src_pieces(0).tolist() == vocab.encode(texts[0])


def test_vocab_from_takes_the_models_source_markers(demo: Path, tmp_path: Path) -> None:
    """A model trained with --source-markers reads a BOS before every source: prepare --vocab-from it made data
    without them (fine-tuning changed the model's input without a word); --source-markers against a model trained
    without them is refused before anything is written."""
    marked = prepare(**files_of(demo), out_dir=tmp_path / "marked", vocab_size=200, source_markers=True)
    manifest = prepare(**files_of(demo), out_dir=tmp_path / "ft", vocab_from=tmp_path / "marked")
    assert marked["source_markers"] and manifest["source_markers"] and manifest["options"]["source_markers"]
    ours, theirs = (DataDir.load(tmp_path / name).split("valid").src(0).tolist() for name in ("ft", "marked"))
    assert ours == theirs
    plain = prepare(**files_of(demo), out_dir=tmp_path / "plain", vocab_size=200)
    assert not plain["source_markers"]
    with pytest.raises(DataError, match="--source-markers with --vocab-from: the model was trained without"):
        prepare(**files_of(demo), out_dir=tmp_path / "no", vocab_from=tmp_path / "plain", source_markers=True)
    assert not (tmp_path / "no").exists()


def test_a_corpus_left_empty_is_an_error(demo: Path, tmp_path: Path) -> None:
    """One of several training corpora with no pair left (an empty file, or every pair filtered) was reported as
    "0 kept" and the data prepared without it."""
    empty = write_lines(tmp_path / "empty.txt", [])
    corpora = [Corpus("de-en", demo / "train.src", demo / "train.tgt"),
               Corpus("fr-en", empty, write_lines(tmp_path / "empty.en", []))]  # fmt: skip
    with pytest.raises(DataError, match=r"empty.txt: no training pairs of training corpus 'fr-en' left after"):
        valid = [Corpus("de-en", demo / "valid.src", demo / "valid.tgt")]
        prepare(out_dir=tmp_path / "o", corpora=corpora, valid=valid, vocab_size=200)
    assert not (tmp_path / "o" / MANIFEST).exists()


def test_translate_warns_of_a_leading_tag_the_model_lacks(multilingual: tuple[Path, dict], capsys) -> None:
    """A model trained with --target-tags read an unknown tag ("<2cs>" for a model of <2en>) as text without a word,
    translating into whatever language it then guessed."""
    from adlnmt.inference.translator import Translator
    from adlnmt.model import Seq2Seq
    from adlnmt.model_config import ModelConfig

    data = DataDir.load(multilingual[0])
    encoder = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
    decoder = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"
    config = ModelConfig(encoder, decoder, data.src_vocab.size, data.tgt_vocab.size, d_model=16, heads=2)
    translator = Translator(Seq2Seq(config), data, 64)
    assert translator.encode("<2en> The dog runs.", 1)[0] == data.src_vocab.tag_id("<2en>")
    assert capsys.readouterr().err == ""
    translator.encode("<2cs> The dog runs.", 2)
    assert "warning: input line 2: <2cs> is not a language tag of this model (its tags: <2en>)" in (
        capsys.readouterr().err
    )


def test_target_tags_need_language_names(demo: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not name its languages as SRC-TGT"):
        prepare(**files_of(demo), out_dir=tmp_path / "o", target_tags=True)


def test_target_tags_refuse_one_language_in_two_cases(demo: Path, tmp_path: Path) -> None:
    """Corpora en-DE and fr-de were tagged <2DE> and <2de>: one language, two tags the model learns apart."""
    corpora = [Corpus("en-DE", demo / "train.src", demo / "train.tgt"),
               Corpus("fr-de", demo / "valid.src", demo / "valid.tgt")]  # fmt: skip
    with pytest.raises(DataError, match=r"corpora 'en-DE' and 'fr-de' spell one target language in two cases"):
        prepare(out_dir=tmp_path / "o", corpora=corpora, valid=corpora[:1], target_tags=True, vocab_size=200)
    assert not (tmp_path / "o").exists()
