"""`adlnmt prepare` on hostile corpora: NUL bytes, a BOM, CR and CRLF line ends, Unicode line separators inside
lines, 1 MB lines, whitespace-only lines, invalid UTF-8, files of different lengths, empty files. Every line carries
its own id on both sides; each kept pair is decoded back from the prepared arrays and its ids must match — a
dropped pair is counted, never a misaligned one."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.data.data_dir import DataDir

WORDS = [
    "the",
    "a",
    "dog",
    "cat",
    "runs",
    "sits",
    "on",
    "in",
    "big",
    "small",
    "red",
    "blue",
    "man",
    "woman",
    "child",
    "ball",
    "park",
    "street",
    "water",
]
HOSTILE = [
    lambda i: f"\x00{i}",  # NUL bytes
    lambda i: "\r",  # a CR inside the line
    lambda i: "\u2028",  # LINE SEPARATOR
    lambda i: "\u2029",  # PARAGRAPH SEPARATOR
    lambda i: "\x85",  # NEXT LINE (U+0085)
    lambda i: "\x0b\x0c",  # vertical tab, form feed
]


def sentence(rng: random.Random, number: int) -> str:
    """``idN`` at both ends (so a cut or a shift shows) and ordinary words between."""
    return " ".join([f"id{number}", *rng.choices(WORDS, k=rng.randint(2, 8)), f"id{number}"])


def hostile_corpus(root: Path, lines: int = 400, seed: int = 7) -> dict[str, list[int]]:
    """Write ``train.src``/``train.tgt`` (CRLF and LF mixed, a BOM, hostile characters, whitespace-only and 1 MB
    lines) and clean ``valid.*``; return which ids are kept, and which must be dropped."""
    rng = random.Random(seed)
    src, tgt, kept, dropped = [], [], [], []
    for i in range(lines):
        a, b = sentence(rng, i), sentence(rng, i)
        if i % 7 == 3:  # a hostile character inside a line, on one side
            if i % 2:
                a = a.replace(" ", f" {HOSTILE[i % len(HOSTILE)](i)} ", 1)
            else:
                b = b.replace(" ", f" {HOSTILE[i % len(HOSTILE)](i)} ", 1)
        if i % 29 == 5:
            b = " \t " if i % 2 else "\u3000"  # whitespace only: the pair is dropped
        if i == 101:
            a = f"id{i} " + "the dog " * 125_000 + f"id{i}"  # 1 MB: dropped by the length filter
        (dropped if i % 29 == 5 or i == 101 else kept).append(i)
        src.append(a)
        tgt.append(b)
    ends = ["\r\n" if i % 3 == 0 else "\n" for i in range(lines)]
    (root / "train.src").write_bytes(("\ufeff" + "".join(s + e for s, e in zip(src, ends, strict=True))).encode())
    (root / "train.tgt").write_bytes("".join(t + e for t, e in zip(tgt, ends, strict=True)).encode())
    valid = [sentence(rng, 10_000 + i) for i in range(30)]
    (root / "valid.src").write_text("\n".join(valid) + "\n", encoding="utf-8")
    (root / "valid.tgt").write_text("\n".join(valid) + "\n", encoding="utf-8")
    return {"kept": kept, "dropped": dropped}


def prepare(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    argv = ["prepare", "--train-src", str(root / "train.src"), "--train-tgt", str(root / "train.tgt"),
            "--valid-src", str(root / "valid.src"), "--valid-tgt", str(root / "valid.tgt"), "--out",
            str(root / "data"), "--vocab-size", "120", "--max-len", "40", "--overwrite"]  # fmt: skip
    status = main(argv)
    return status, capsys.readouterr().err


def ids(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"id(\d+)", text)]


def test_every_kept_pair_decodes_to_its_own_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = hostile_corpus(tmp_path)
    status, err = prepare(tmp_path, capsys)
    assert status == 0, err
    data = DataDir.load(tmp_path / "data")
    train = data.split("train")
    found = []
    for i in range(len(train)):
        src, tgt = (
            data.src_vocab.decode(train.src_pieces(i).tolist()),
            data.tgt_vocab.decode(train.tgt_pieces(i).tolist()),
        )
        src_ids, tgt_ids = ids(src), ids(tgt)
        assert src_ids and len(set(src_ids)) == 1 and src_ids == tgt_ids[: len(src_ids)], (src, tgt)
        found.append(src_ids[0])
    assert sorted(found) == expected["kept"]
    assert "\ufeff" not in data.src_vocab.decode(train.src_pieces(found.index(0)).tolist())  # the BOM is no text
    counts = data.manifest["splits"]["train"]
    assert counts["read"] == 400 and counts["kept"] == len(expected["kept"])
    assert counts["empty"] + counts["too_long"] + counts["bad_ratio"] == len(expected["dropped"])


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        (b"a b\nc d\n", b"a b\n", "line counts differ"),
        (b"a b\n\xff\xfe c\n", b"a b\nc d\n", "train.src:2: invalid UTF-8"),
        (b"", b"", "train.src"),  # an empty corpus: the error names the file
        (b" \n\t\n", b"x\ny\n", "train.src"),  # nothing but whitespace: the same
    ],
)
def test_broken_corpora_are_one_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: bytes, target: bytes, message: str
) -> None:
    hostile_corpus(tmp_path)
    (tmp_path / "train.src").write_bytes(source)
    (tmp_path / "train.tgt").write_bytes(target)
    status, err = prepare(tmp_path, capsys)
    assert status == 2 and message in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
