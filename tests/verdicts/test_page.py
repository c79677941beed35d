"""The verdict table of docs/reproductions.md is built from the archived claims.json files, kept between markers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.verdicts.page import END, PROGRESS_END, PROGRESS_START, START, replace_block
from shared_data import needs_multi30k

REPOSITORY = Path(__file__).resolve().parents[2]


def archive(root: Path, verdict: str, before: bool = True, post: str = "") -> Path:
    folder = root / "results" / "tiny-cpu"
    folder.mkdir(parents=True, exist_ok=True)
    other = {"test": "later", "seed_list": "A 2; B 1", "verdict": "inconclusive"}
    claim = {"quote": "A beats B " * 20, "tested_as": "A > B", "test": "t", "seed_list": "1", "p_holm": 0.0123,
             "p": 0.0041, "p_mc_error": 0.0002, "resamples": 100000, "family_size": 3, "mde_text": "±1.10",
             "registration": "abc1234 (2026-11-23): before the results", "registered_before_results": before,
             "post_registration": post, "summary": "+1.20 [+0.40, +2.00] (95 %)", "verdict": verdict,
             "measured": "holds", "other_tests": [other]}  # fmt: skip
    ranks = [{"column": "WMT BLEU", "test": "t", "metric": "bleu", "rows": 4, "seeds": 9, "rho": 0.4,
              "interval": [-0.2, 0.8], "level": 0.95}]  # fmt: skip
    rates = {"better": "95 % two-sided"}
    (folder / "claims.json").write_text(json.dumps({"grid": "tiny", "scale": "cpu", "error_rates": rates,
                                                    "rank_agreement": ranks, "claims": [claim]}))  # fmt: skip
    (folder / "results.csv").write_text("variant,seeds_finished,seeds_total,parameters\nA,3,3,10\nB,1,3,12\nC,0,2,9\n")
    return folder


def test_the_table_goes_between_the_markers_and_check_tells_a_stale_one(tmp_path: Path, capsys) -> None:
    folder = archive(tmp_path, "holds")
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\n{START}\nold table\n{END}\n\nafter\n")
    assert main(["verdicts", str(folder), "--readme", str(readme), "--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert main(["verdicts", str(folder), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith(f"# Title\n\n{START}\nError rates, one per claim kind") and text.endswith(
        f"{END}\n\nafter\n"
    )
    assert "*better*: 95 % two-sided" in text
    line = next(line for line in text.splitlines() if line.startswith("| [tiny (cpu)](results/tiny-cpu/claims.md)"))
    assert (
        line.endswith(
            "| H1: A > B | t (1) | +1.20 [+0.40, +2.00] (95 %) | 0.0041 ± 0.0002 (100,000 replicates) | 0.012 (of 3) "
            "| ±1.10 | abc1234 (2026-11-23): before the results | **holds** | later (A 2; B 1): inconclusive |"
        )
        and "…" in line
    )  # the long quote shortened
    assert (
        text.index(line)
        < text.index("**Exploratory")
        < text.index("| WMT BLEU | bleu t | 4 (9 runs) | +0.40 [-0.20, +0.80] |")
    )
    assert main(["verdicts", str(folder), "--readme", str(readme), "--check"]) == 0
    archive(tmp_path, "inconclusive: not converged")
    assert main(["verdicts", str(folder), "--readme", str(readme), "--check"]) == 1
    assert main(["verdicts", str(folder), "--readme", str(readme)]) == 0
    assert "| **inconclusive: not converged** (measured: holds) |" in readme.read_text()
    record = json.loads((folder / "claims.json").read_text())
    record["claims"][0]["also_one_seed"] = True  # a row of one seed too
    (folder / "claims.json").write_text(json.dumps(record))
    assert main(["verdicts", str(folder), "--readme", str(readme)]) == 0
    assert "| **inconclusive: not converged** (also inconclusive: one seed; measured: holds) |" in readme.read_text()


def test_a_claim_registered_after_results_goes_to_the_exploratory_section_with_its_later_runs_verdict(
    tmp_path: Path,
) -> None:
    folder = archive(tmp_path, "holds", before=False, post="inconclusive: one seed")
    readme = tmp_path / "README.md"
    readme.write_text(f"{START}\n{END}\n")
    assert main(["verdicts", str(folder), "--readme", str(readme)]) == 0
    text = readme.read_text()
    confirmatory, exploratory = text.split("**Exploratory")
    assert "tiny (cpu)" not in confirmatory and "| – | none |" in confirmatory
    assert "**holds**; on the runs after its registration alone: inconclusive: one seed |" in exploratory
    archive(tmp_path, "out of scope at this data size")
    record = json.loads((folder / "claims.json").read_text())
    record["claims"][0]["out_of_scope"] = "the paper excludes IWSLT"
    (folder / "claims.json").write_text(json.dumps(record))
    assert main(["verdicts", str(folder), "--readme", str(readme)]) == 0
    assert "| **out of scope at this data size** (the paper excludes IWSLT; measured: holds) |" in readme.read_text()


def test_missing_markers_and_archives_are_clear_errors(tmp_path: Path, capsys) -> None:
    with pytest.raises(UserError, match="no table markers"):
        replace_block("no markers here\n", "| t |", tmp_path / "README.md")
    with pytest.raises(UserError, match=r"README.md:1: the end marker comes before the start marker \(line 2\)"):
        replace_block(f"{END}\n{START}\n", "| t |", tmp_path / "README.md")
    assert main(["verdicts", str(tmp_path)]) == 2
    assert "claims.json: missing or malformed" in capsys.readouterr().err
    assert main(["verdicts", str(tmp_path / "nowhere")]) == 2  # was "nowhere/claims.json: missing or malformed"
    assert (
        capsys.readouterr().err == f"error: {tmp_path / 'nowhere'}: not a folder (a grid's archive, such as "
        "experiments/results/NAME-SCALE)\n"
    )


@pytest.mark.parametrize(
    ("entry", "change", "expected"),
    [
        ("claims", lambda c: c.pop("other_tests"), "claims[0]: malformed (KeyError: 'other_tests')"),
        ("claims", lambda c: c.update(p="0.1"), "claims[0]: malformed (ValueError: Unknown format code 'f'"),
        ("rank_agreement", lambda r: r.update(interval=[0.1]), "rank_agreement[0]: malformed (IndexError: "),
    ],
)
def test_a_malformed_entry_of_claims_json_names_it(tmp_path: Path, capsys, entry: str, change, expected: str) -> None:
    """A claims.json entry missing a key or of a wrong type (hand-edited, truncated) ended in a Python traceback."""
    folder = archive(tmp_path, "holds")
    record = json.loads((folder / "claims.json").read_text())
    change(record[entry][0])
    (folder / "claims.json").write_text(json.dumps(record))
    assert main(["verdicts", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"{folder / 'claims.json'}: {expected}" in err and "Traceback" not in err
    (folder / "claims.json").write_text(json.dumps({"claims": []}))  # no grid name: KeyError 'grid'
    assert main(["verdicts", str(folder)]) == 2
    assert f"{folder / 'claims.json'}: missing or malformed" in capsys.readouterr().err


def test_an_archive_named_twice_is_an_error(tmp_path: Path, capsys) -> None:
    """``adlnmt verdicts results/* results/mine`` listed every claim of results/mine twice."""
    folder = archive(tmp_path, "holds")
    assert main(["verdicts", str(folder)]) == 0 and capsys.readouterr().out.count("| H1: A > B |") == 1
    for again in (f"{folder}/", str(folder / ".." / folder.name)):
        assert main(["verdicts", str(folder), again]) == 2
        assert "the same archive named twice (its claims would be listed twice)" in capsys.readouterr().err


def test_the_reproductions_page_matches_the_committed_results(monkeypatch) -> None:
    """Committing a finished run (and its claims.json) without rebuilding the docs page's table fails here."""
    monkeypatch.chdir(REPOSITORY)
    assert main(["verdicts", "--page", "docs/reproductions.md", "--check"]) == 0


@needs_multi30k
def test_a_committed_archive_rebuilds_unchanged(tmp_path: Path, monkeypatch) -> None:
    """``--report-only`` from the committed runs writes the committed Markdown (report, tables, claims) unchanged: a
    wording changed in the code without the archives rebuilt fails here; ADL Table 2, the smallest archive, stands
    for all. The .json and .csv files keep full floats, whose last bits may differ on another CPU's SIMD kernels."""
    committed = REPOSITORY / "experiments/results/adl-table2-cpu"
    rebuilt = tmp_path / "adl-table2-cpu"
    shutil.copytree(committed, rebuilt, ignore=shutil.ignore_patterns("experiment.lock"))
    monkeypatch.chdir(REPOSITORY)
    arguments = ["experiments/adl-table2.yaml", "--scale", "cpu", "--report-only", "--results", str(rebuilt),
                 "--out", str(tmp_path / "work")]  # nothing written into the repository  # fmt: skip
    assert main(["experiment", *arguments]) == 0
    files = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.suffix == ".md")
    assert len(files) > 2
    assert [f for f in files if (committed / f).read_bytes() != (rebuilt / f).read_bytes()] == []


def test_without_archives_the_readme_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"{START}\n| old |\n{END}\n")
    assert main(["verdicts", "--readme", str(readme)]) == 0
    assert readme.read_text().splitlines()[1] == "No grid has committed runs yet (`experiments/results/*/claims.json`)."
    assert main(["verdicts"]) == 2  # nothing to print


def test_the_progress_table_counts_each_grids_finished_runs_where_the_page_asks_for_it(tmp_path: Path, capsys) -> None:
    folder = archive(tmp_path, "holds")
    page = tmp_path / "page.md"
    page.write_text(f"{PROGRESS_START}\nold\n{PROGRESS_END}\n\n{START}\n{END}\n")
    assert main(["verdicts", str(folder), "--page", str(page)]) == 0
    lines = page.read_text().splitlines()
    assert lines[1:4] == [
        "| table | runs finished | rows short of their planned seeds (finished / planned) |",
        "|---|---:|---|",
        "| [tiny (cpu)](results/tiny-cpu/results.md) | 4 of 8 | B 1 / 3, C 0 / 2 |",
    ]
    (folder / "results.csv").write_text("variant,seeds_finished,seeds_total\nA,3,3\n")
    assert main(["verdicts", str(folder), "--page", str(page), "--check"]) == 1  # a finished run makes it stale
    assert main(["verdicts", str(folder), "--page", str(page)]) == 0
    assert "| [tiny (cpu)](results/tiny-cpu/results.md) | 3 of 3 | none |" in page.read_text()
    (folder / "results.csv").write_text("variant,seeds\nA,3\n")
    assert main(["verdicts", str(folder), "--page", str(page)]) == 2
    assert "tiny-cpu/results.csv: missing or malformed" in capsys.readouterr().err


def test_check_without_a_page_is_an_error(tmp_path: Path, capsys) -> None:
    """Issue 69 point 15: ``verdicts --check`` without ``--page`` printed the table and exited 0."""
    assert main(["verdicts", str(tmp_path), "--check"]) == 2
    assert "--check compares a page's tables with the archives: give the page" in capsys.readouterr().err
