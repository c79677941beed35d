"""Hostile environment for the commands' output files (issue 69 point 4): ``translate --output``, ``score-pairs
--output``, ``contrastive --json/--output`` and ``contrastive-suite --output`` are written atomically, so that a
full disk (the fault hook of :mod:`adlnmt.store.atomic` fails the write there) keeps the previous file, leaves no
partial or temporary file, and is one message naming the file (not an empty name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.store.atomic import FAULT_HOOK

PREVIOUS = "the previous output\n"


def command(kind: str, model: Path, demo_data: Path, tmp_path: Path, out: Path) -> list[str]:
    source = demo_data / "corpus" / "test.src"
    target = demo_data / "corpus" / "test.tgt"
    suite = tmp_path / "suite.jsonl"
    if kind in ("contrastive", "contrastive --json"):
        assert main(["contrastive-suite", "demo", "--size", "20", "--output", str(suite)]) == 0
    return {
        "translate": ["translate", "--model", str(model), "--input", str(source), "--output", str(out)],
        "score-pairs": [
            "score-pairs",
            "--model",
            str(model),
            "--source",
            str(source),
            "--target",
            str(target),
            "--output",
            str(out),
        ],
        "contrastive": [
            "contrastive",
            "--model",
            str(model),
            "--suite",
            str(suite),
            "--output",
            str(out),
            "--resamples",
            "10",
        ],
        "contrastive --json": [
            "contrastive",
            "--model",
            str(model),
            "--suite",
            str(suite),
            "--json",
            str(out),
            "--output",
            str(tmp_path / "table.md"),
            "--resamples",
            "10",
        ],
        "contrastive-suite": ["contrastive-suite", "demo", "--size", "20", "--output", str(out)],
    }[kind]


@pytest.mark.parametrize("kind", ["translate", "score-pairs", "contrastive", "contrastive --json", "contrastive-suite"])
def test_a_full_disk_keeps_the_previous_output_and_names_it(
    kind: str, agreement_model: Path, demo_data: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    out = tmp_path / "out" / "result.txt"
    out.parent.mkdir()
    out.write_text(PREVIOUS, encoding="utf-8")
    argv = command(kind, agreement_model, demo_data, tmp_path, out)
    monkeypatch.setenv(FAULT_HOOK, "enospc@result.txt:written")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{out}: cannot write (No space left on device); its previous version is intact" in err
    assert out.read_text(encoding="utf-8") == PREVIOUS
    assert [p.name for p in out.parent.iterdir()] == ["result.txt"]  # no partial or temporary file
    monkeypatch.delenv(FAULT_HOOK)
    assert main(argv) == 0 and out.read_text(encoding="utf-8") != PREVIOUS
