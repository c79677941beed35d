"""The toy corpus: determinism, split sizes and disjointness, and the reordering/agreement it is meant to teach."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from adlnmt.data.demo import write_demo_corpus

FILES = [f"{split}.{side}" for split in ("train", "valid", "test") for side in ("src", "tgt")]
CONJUNCTIONS = {"and", "but", "because", "while"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    write_demo_corpus(out, size=3000, seed=1)
    return out


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def pairs(corpus: Path, split: str = "train") -> list[tuple[str, str]]:
    return list(zip(lines(corpus / f"{split}.src"), lines(corpus / f"{split}.tgt"), strict=True))


def test_same_seed_same_bytes_other_seed_other_text(corpus: Path, tmp_path: Path) -> None:
    write_demo_corpus(tmp_path / "again", size=3000, seed=1)
    write_demo_corpus(tmp_path / "other", size=3000, seed=2)
    for name in FILES:
        assert (tmp_path / "again" / name).read_bytes() == (corpus / name).read_bytes(), name
    assert (tmp_path / "other" / "train.src").read_bytes() != (corpus / "train.src").read_bytes()


# sha256 of the six files concatenated (in FILES order), written by the generator as it is: a change
# of how it works must give the same bytes (tests and committed benchmarks depend on them).
PINNED = {
    (50, 1): "af16d0f3cdaf065880ea276150481e45d4c9969c3d513ee49ce184be1257c34d",
    (1200, 3): "1eb577cdbd41bd5dfccd9efaa327cb4a853f3017c55918a68e383fb8ca102221",
    (12000, 1): "de3d7fba45f7241254b990fd5e6b0562261925bea194d1a80e20277e2b528b81",
}


@pytest.mark.parametrize(("size", "seed"), PINNED)
def test_the_bytes_are_pinned(size: int, seed: int, tmp_path: Path) -> None:
    write_demo_corpus(tmp_path, size=size, seed=seed)
    digest = hashlib.sha256(b"".join((tmp_path / name).read_bytes() for name in FILES)).hexdigest()
    assert digest == PINNED[size, seed]


def test_the_pairs_are_written_as_they_are_generated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator held every pair and a set of the sources until it wrote (~510 bytes a pair: 50M pairs did not
    fit in 24 GiB); it writes ``WRITE_PAIRS`` at a time and keeps a hash of each source: under 40 bytes a pair."""
    monkeypatch.setattr("adlnmt.data.demo.WRITE_PAIRS", 500)
    tracemalloc.start()
    try:
        write_demo_corpus(tmp_path, size=20000, seed=1)  # 22,000 pairs
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 22_000 * 40


def test_split_sizes(corpus: Path, tmp_path: Path) -> None:
    assert [len(lines(corpus / f"{s}.src")) for s in ("train", "valid", "test")] == [3000, 150, 150]
    sizes = write_demo_corpus(tmp_path, size=200, seed=3)
    assert sizes == {"train": 200, "valid": 50, "test": 50}
    for name in FILES:
        assert len(lines(tmp_path / name)) == sizes[name.split(".")[0]]


def test_splits_are_disjoint(corpus: Path) -> None:
    train, valid, test = (set(lines(corpus / f"{s}.src")) for s in ("train", "valid", "test"))
    assert len(train) == 3000  # no duplicates inside train either
    assert not train & test
    assert not train & valid
    assert not valid & test


def test_lengths_and_variety(corpus: Path) -> None:
    data = pairs(corpus)
    lengths = [len(src.split()) for src, _ in data]
    assert min(lengths) == 3
    assert 18 <= max(lengths) <= 20
    words = [w.lower().rstrip(".") for src, _ in data for w in src.split()]
    assert 50 <= len(set(words)) <= 250
    assert CONJUNCTIONS & set(words)
    assert {"quickly", "yesterday", "in", "near", "not"} <= set(words)
    assert all(src[0].isupper() and src.endswith(".") and tgt[0].isupper() and tgt.endswith(".") for src, tgt in data)


# (source noun, its number) -> (target article + noun, verb endings present/past); cat/dog are masculine, bird
# feminine: the target verb agrees with the subject's gender, which the source never shows.
SUBJECTS = {
    "cat": ("Lo gato", ("et", "it")),
    "cats": ("Li gatos", ("en", "in")),
    "dog": ("Lo kane", ("et", "it")),
    "dogs": ("Li kanes", ("en", "in")),
    "bird": ("La avi", ("eta", "ita")),
    "birds": ("Le avis", ("ena", "ina")),
}


def test_articles_and_verbs_agree_with_the_subject(corpus: Path) -> None:
    checked = set()
    for src, tgt in pairs(corpus):
        words = src.rstrip(".").split()
        match = re.match(r"The (cats?|dogs?|birds?) ", src)
        if not match or CONJUNCTIONS & set(words):
            continue
        prefix, endings = SUBJECTS[match.group(1)]
        verb = tgt.rstrip(".").split()[-1]  # SOV: the verb closes the clause
        assert tgt.startswith(prefix + " "), (src, tgt)
        tense = 1 if words[2] in {"did", "saw", "slept", "ran", "sang", "swam", "threw", "found", "built"} else 0
        if words[2].endswith("ed"):
            tense = 1
        assert re.fullmatch(r"[a-z]+" + endings[tense], verb), (src, tgt)
        if endings[tense] in ("et", "it"):  # a masculine-singular ending is not the start of a longer one
            assert not verb.endswith(("eta", "ita")), (src, tgt)
        checked.add(match.group(1))
    assert checked == set(SUBJECTS)  # every subject form occurred


ADJECTIVES = {"big": "grand", "small": "pikol", "old": "vek", "red": "rub"}
VERBS = {"sleeps": "dorm", "sleep": "dorm", "slept": "dorm", "runs": "kur", "run": "kur", "ran": "kur"}
ENDINGS = r"(et|eta|en|ena|it|ita|in|ina)"


def test_verb_moves_to_the_end_and_adjective_after_noun(corpus: Path) -> None:
    found = 0
    for src, tgt in pairs(corpus):
        # "The big dog runs." -> "Lo kane grando kuret.": adjective after the noun, agreeing with it
        match = re.fullmatch(r"The (big|small|old|red) (\w+) (sleeps|sleep|slept|runs|run|ran)\.", src)
        if match:
            adjective, _, verb = match.groups()
            assert re.fullmatch(rf"\w+ \w+ {ADJECTIVES[adjective]}[oaie] {VERBS[verb]}{ENDINGS}\.", tgt), (src, tgt)
            found += 1
        # "The cat sees the old dog." -> "Lo gato lo kane veko videt.": SVO -> SOV
        match = re.fullmatch(r"The \w+ (sees|saw) the (big|small|old|red) \w+\.", src)
        if match:
            stem = ADJECTIVES[match.group(2)]
            assert re.fullmatch(rf"\w+ \w+ \w+ \w+ {stem}[oaie] vid{ENDINGS}\.", tgt), (src, tgt)
            found += 1
    assert found >= 5


def test_rejects_bad_size(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="size"):
        write_demo_corpus(tmp_path, size=0)


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_partial_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A disk that fills half-way through ``train.tgt`` (its second write fails, after the first was written): the
    command names the file, the previous corpus stays whole, and no partial or temporary file is left."""
    from adlnmt.cli import main

    out = tmp_path / "corpus"
    write_demo_corpus(out, size=200, seed=1)
    before = {name: (out / name).read_bytes() for name in FILES}
    monkeypatch.setattr("adlnmt.data.demo.WRITE_PAIRS", 100)  # 300 training pairs: three writes a file
    path_open = Path.open

    class FillingUp:
        """A file whose second write finds the disk full."""

        def __init__(self, handle: Any) -> None:
            self.handle, self.writes = handle, 0

        def write(self, text: str) -> int:
            self.writes += 1
            if self.writes == 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.handle.write(text)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.handle, name)

    def fill_the_disk(path: Path, *args: Any, **kwargs: Any) -> Any:
        handle = path_open(path, *args, **kwargs)
        return FillingUp(handle) if path.name.startswith(".train.tgt.tmp-") else handle

    monkeypatch.setattr(Path, "open", fill_the_disk)
    assert main(["demo-corpus", "--out", str(out), "--size", "300", "--seed", "2", "--overwrite"]) != 0
    assert f"{out / 'train.tgt'}: cannot write (No space left on device)" in capsys.readouterr().err
    assert {name: (out / name).read_bytes() for name in FILES} == before
    assert sorted(path.name for path in out.iterdir()) == sorted(FILES)


def test_no_file_is_replaced_until_all_are_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last file fails as it is completed (its fsync finds the disk full): no file of the previous corpus was
    replaced (they were, one by one, up to the one that failed)."""
    from adlnmt.atomic import FAULT_HOOK
    from adlnmt.cli import main

    out = tmp_path / "corpus"
    write_demo_corpus(out, size=200, seed=1)
    before = {name: (out / name).read_bytes() for name in FILES}
    monkeypatch.setenv(FAULT_HOOK, "enospc@test.tgt:written")
    assert main(["demo-corpus", "--out", str(out), "--size", "300", "--seed", "2", "--overwrite"]) == 2
    assert f"{out / 'test.tgt'}: cannot write (No space left on device)" in capsys.readouterr().err
    assert {name: (out / name).read_bytes() for name in FILES} == before
    assert sorted(path.name for path in out.iterdir()) == sorted(FILES)


def test_a_killed_runs_temporaries_are_removed_by_the_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run killed before its renames left its six temporaries (``.NAME.tmp-PID``, ~5 GiB at ``--size``
    50,000,000) and nothing removed them. The next run into the folder removes those of a process no longer
    running, and says so, before the free space is checked; a running process's are kept."""
    from adlnmt.atomic import process_alive
    from adlnmt.cli import main

    out = tmp_path / "corpus"
    out.mkdir()
    dead = next(pid for pid in range(2**22 - 1, 1, -1) if not process_alive(pid))
    stale = [out / f".{name}.tmp-{dead}" for name in FILES]
    live = out / f".train.src.tmp-{os.getppid()}"
    other = out / f".notes.txt.tmp-{dead}"
    for path in (*stale, live, other):
        path.write_text("half a corpus")
    assert main(["demo-corpus", "--out", str(out), "--size", "100"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [f"removed {path}, left by a demo-corpus run that was killed" for path in stale]
    assert sorted(path.name for path in out.iterdir()) == sorted([*FILES, live.name, other.name])


def test_a_size_that_would_not_fit_is_refused_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--size`` had no bound: a huge one filled the disk (or the memory) before failing. It is checked against
    the free space of the nearest existing folder of ``--out`` and the available memory; what fits is written."""
    from adlnmt.cli import main

    def never(*args: object, **kwargs: object) -> dict[str, int]:
        raise AssertionError("a corpus that does not fit was generated")

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=2**30))
    monkeypatch.setattr("adlnmt.data.demo.write_demo_corpus", never)
    out = tmp_path / "new" / "corpus"
    assert main(["demo-corpus", "--out", str(out), "--size", "20000000"]) == 2
    assert (f"error: --size 20,000,000: the corpus (22,000,000 pairs) would take about 2.0 GiB, more than the 1.0 GiB "
            f"free on the disk of {tmp_path}; lower --size") in capsys.readouterr().err  # fmt: skip
    assert not (tmp_path / "new").exists()
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=2**40))
    monkeypatch.setattr("adlnmt.data.demo.available_memory", lambda: 2**30)
    assert main(["demo-corpus", "--out", str(out), "--size", "50000000"]) == 2
    assert ("error: --size 50,000,000: generating the corpus (55,000,000 pairs) would take about 1.2 GiB of memory, "
            "more than the 1.0 GiB available; lower --size") in capsys.readouterr().err  # fmt: skip
    assert not (tmp_path / "new").exists()
    monkeypatch.setattr("adlnmt.data.demo.write_demo_corpus", write_demo_corpus)
    assert main(["demo-corpus", "--out", str(out), "--size", "100"]) == 0  # 200 pairs: 20 kB on disk, 5 kB memory
    assert sorted(path.name for path in out.iterdir()) == sorted(FILES)


def test_overwrite_needs_room_for_the_whole_new_corpus_beside_the_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--overwrite`` keeps the files it replaces until the new ones are complete (each is renamed over its old file
    at the end), so the disk holds both at the peak: the free space, which the old files already take from, must
    hold the new corpus in full; the old files' size is not counted as room."""
    from adlnmt.cli import main

    out = tmp_path / "corpus"
    write_demo_corpus(out, size=100, seed=1)
    before = {name: (out / name).read_bytes() for name in FILES}
    need = 200 * 100  # --size 100: 200 pairs (100 + 50 + 50), PAIR_DISK_BYTES each
    assert sum(map(len, before.values())) + need - 1 > need  # the old files' room would make it fit
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=need - 1))
    assert main(["demo-corpus", "--out", str(out), "--size", "100", "--seed", "2", "--overwrite"]) == 2
    assert "error: --size 100: the corpus (200 pairs) would take about" in capsys.readouterr().err
    assert {name: (out / name).read_bytes() for name in FILES} == before
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=need))
    assert main(["demo-corpus", "--out", str(out), "--size", "100", "--seed", "2", "--overwrite"]) == 0
    assert {name: (out / name).read_bytes() for name in FILES} != before


def test_overwrite_refused_for_room_suggests_removing_the_old_corpus_where_that_would_make_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal said "lower --size" alone, though removing the corpus ``--overwrite`` replaces would make room."""
    from adlnmt.cli import main

    out = tmp_path / "corpus"
    write_demo_corpus(out, size=100, seed=1)
    old, need = sum((out / name).stat().st_size for name in FILES), 200 * 100
    usage = shutil.disk_usage(tmp_path)
    argv = ["demo-corpus", "--out", str(out), "--size", "100", "--overwrite"]
    removing = f", or remove the old corpus in {out} first (its files take 0.0 GiB; the new one then fits)"
    for free, suggested in ((need - old, removing), (need - old - 1, "")):
        monkeypatch.setattr(shutil, "disk_usage", lambda path, free=free: usage._replace(free=free))
        assert main(argv) == 2
        assert capsys.readouterr().err.rstrip().endswith(f"lower --size{suggested}")
