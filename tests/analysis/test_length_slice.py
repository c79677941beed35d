"""experiments/analysis/length_slice.py: rows compared on a source-length slice from hypothesis files."""

from __future__ import annotations

from pathlib import Path

import pytest

from .scripts import analysis_script

SOURCES = ["ein Hund", "zwei Hunde laufen schnell", "ein Mann steht auf der Straße und wartet auf den Bus dort"]
REFERENCES = ["a dog", "two dogs run fast", "a man stands on the street and waits for the bus there"]
LONGER = ["a dog is running on and on", REFERENCES[1], REFERENCES[2]]  # over-generates on the first only


@pytest.fixture(scope="module")
def length_slice():
    yield from analysis_script("length_slice")


def rows(tmp_path: Path, length_slice, **systems: list[list[str]]) -> list:
    made = []
    for name, seeds in systems.items():
        files = []
        for seed, lines in enumerate(seeds, 1):
            files.append(tmp_path / f"{name}-{seed}.txt")
            files[-1].write_text("\n".join(lines) + "\n")
        made.append(length_slice.parse_row(f"{name}={','.join(map(str, files))}"))
    return made


def test_a_row_worse_on_short_sources_only_shows_it_there(tmp_path: Path, length_slice) -> None:
    both = rows(tmp_path, length_slice, ref=[REFERENCES, REFERENCES], longer=[LONGER, REFERENCES])
    short = length_slice.table(both, SOURCES, REFERENCES, 1, 4).splitlines()
    assert short[0] == "Sources of 1–4 words: 2 of 3 sentences."
    assert short[4].startswith("| ref | 2 | 100.00 | 100.00 | 1.000 | – | – |")
    assert short[5].split(" | ")[4] == f"{(11 + 6) / 2 / 6:.3f}"  # hyp words 11 and 6 (the seeds) to 6
    assert short[5].split(" | ")[5].startswith("-")  # lower sentBLEU than the first row
    long = length_slice.table(both, SOURCES, REFERENCES, 5, None).splitlines()
    assert long[0] == "Sources of 5+ words: 1 of 3 sentences."
    assert long[5].split(" | ")[1:6] == ["2", "100.00", "100.00", "1.000", "+0.00 [+0.00, +0.00], p 1.0000"]


def test_a_malformed_row_is_refused(length_slice) -> None:
    with pytest.raises(Exception, match="expected NAME=HYP"):
        length_slice.parse_row("no-equals-sign")
