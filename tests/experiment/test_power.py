"""``adlnmt experiment GRID --power``: each claim's minimum detectable effect planned before its runs from pilot
rows (another grid's finished runs on the same test set), and whether a margin claim is decidable at that size."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.experiment.folders import output_folders
from adlnmt.experiment.power import power_table

from .test_judge import REFERENCES, WORSE, make_grid, write_runs


def varied(lines: list[str], seed: int) -> list[str]:
    """The lines with every ``seed + 2``-th one cut short: runs of one row that differ by seed."""
    return [line.rsplit(" ", 1)[0] if i % (seed + 2) == 0 else line for i, line in enumerate(lines)]


def pilot(root: Path, tests: tuple[str, ...] = ("t",)) -> Path:
    """A grid with two finished runs of each of its rows A and B on its test sets (``t``); its grid file."""
    root.mkdir(parents=True, exist_ok=True)
    grid = make_grid(root, [], tests)
    runs = {(row, seed): {"tests": {test: varied(lines, seed) for test in tests}}
            for row, lines in (("A", REFERENCES), ("B", WORSE)) for seed in (1, 2)}  # fmt: skip
    write_runs(grid, output_folders(grid).work, runs)
    return Path(grid.path)


def planned(root: Path, claims: list[dict], seeds: list[int] | None = None) -> Path:
    """A grid of ``claims`` whose test set has the pilot's references (a copy: compared by content), not run."""
    root.mkdir(parents=True, exist_ok=True)
    grid = make_grid(root, claims)
    if seeds is not None:
        grid.path.write_text(grid.path.read_text().replace("- 1\n- 2\n", "".join(f"- {s}\n" for s in seeds)))
    return Path(grid.path)


def power(*argv: str) -> str:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        assert main(["experiment", *argv, "--power"]) == 0
    return output.getvalue()


def test_margins_below_the_detectable_effect_are_undecidable_before_any_run(tmp_path: Path) -> None:
    pilot_file = pilot(tmp_path / "pilot")
    claims = [{"quote": "A is close to B", "close": ["A", "B"], "margin": 0.01},
              {"quote": "A is close to B by a mile", "close": ["A", "B"], "margin": 99.0},
              {"quote": "A beats B", "better": ["A", "B"]},
              {"quote": "A is faster", "faster": ["A", "B"], "ratio": 2.0}]  # fmt: skip
    grid_file = planned(tmp_path / "new", claims)
    table = power(str(grid_file), "--pilot", str(pilot_file))
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| “")}
    assert "**not decidable at this size**: the margin 0.01 is below" in rows["“A is close to B”"]
    assert "decidable: non-inferiority within 99 shows" in rows["“A is close to B by a mile”"]
    assert "found with 80 % power" in rows["“A beats B”"] and "1 pairs of 1 grids" in rows["“A beats B”"]
    assert "a speed claim" in rows["“A is faster”"]
    assert "- g (-): A vs B, 2 + 2 runs:" in table

    more = power(str(planned(tmp_path / "more", claims, seeds=[1, 2, 3, 4, 5, 6])), "--pilot", str(pilot_file))
    detectable = [float(line.split("|")[5].split()[0]) for line in (table, more) for line in line.splitlines()
                  if line.startswith("| “A beats B”")]  # fmt: skip
    assert detectable[1] < detectable[0]  # six seeds a row detect a smaller difference than two


def test_without_a_pilot_on_the_same_references_it_says_so(tmp_path: Path) -> None:
    pilot_file = pilot(tmp_path / "pilot")
    grid_file = planned(tmp_path / "new", [{"quote": "A beats B", "better": ["A", "B"]}])
    (tmp_path / "new" / "ref.txt").write_text("other references\n" * len(REFERENCES))
    assert "no pilot: no other grid has two runs of two rows on this test set" in power(
        str(grid_file), "--pilot", str(pilot_file)
    )
    one_seed = planned(tmp_path / "one", [{"quote": "A beats B", "better": ["A", "B"]}], seeds=[1])
    assert "one seed a row decides nothing" in power(str(one_seed), "--pilot", str(pilot_file))


def test_the_default_pilots_are_the_other_grid_files_next_to_it(tmp_path: Path) -> None:
    pilot_file = pilot(tmp_path)
    shutil.move(pilot_file, tmp_path / "pilot.yaml")
    grid_file = planned(tmp_path / "new", [{"quote": "A beats B", "better": ["A", "B"]}])
    shutil.move(grid_file, tmp_path / "new.yaml")
    from adlnmt.experiment.grid import load_grid

    with pytest.raises(UserError, match=r"--pilot .*missing\.yaml: no such grid file"):
        power_table(load_grid(tmp_path / "new.yaml"), [str(tmp_path / "missing.yaml")])
    assert "1 pairs of 1 grids" in power_table(load_grid(tmp_path / "new.yaml"))


def test_a_default_pilot_that_is_no_grid_is_skipped_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any other YAML file next to the grid (a broken grid, a tool's configuration) leaves --power's default pilots
    with a warning: it used to end the command with that file's error. A pilot given by name is still an error."""
    pilot_file = pilot(tmp_path)
    shutil.move(pilot_file, tmp_path / "pilot.yaml")
    grid_file = planned(tmp_path / "new", [{"quote": "A beats B", "better": ["A", "B"]}])
    shutil.move(grid_file, tmp_path / "new.yaml")
    (tmp_path / "mkdocs.yaml").write_text("site_name: notes\n", encoding="utf-8")
    from adlnmt.experiment.grid import load_grid

    assert "1 pairs of 1 grids" in power_table(load_grid(tmp_path / "new.yaml"))
    assert "mkdocs.yaml skipped as a pilot (give --pilot to choose them): " in capsys.readouterr().err
    with pytest.raises(UserError, match=r"mkdocs\.yaml: site_name: unknown key"):
        power_table(load_grid(tmp_path / "new.yaml"), [str(tmp_path / "mkdocs.yaml")])


def test_a_pooled_claim_is_planned_on_as_many_pilot_test_sets(tmp_path: Path) -> None:
    """Pooled test sets (here two with the same references) need as many test sets of the pilot's, each used once:
    a pilot with one test set plans nothing, one with two plans a smaller effect than on one set alone."""
    claims = [{"quote": "A beats B", "better": ["A", "B"], "test": ["t", "u"]},
              {"quote": "A beats B on t", "better": ["A", "B"], "test": "t"}]  # fmt: skip
    (tmp_path / "new").mkdir()
    grid_file = make_grid(tmp_path / "new", claims, tests=("t", "u")).path
    one = power(str(grid_file), "--pilot", str(pilot(tmp_path / "one")))
    assert "“A beats B” | better | bleu t + u | 2 + 2 | – | no pilot" in one
    two = power(str(grid_file), "--pilot", str(pilot(tmp_path / "two", ("t", "u"))))
    pooled, alone = (float(line.split("|")[5].split()[0]) for line in two.splitlines() if line.startswith("| “"))
    assert pooled < alone


def test_a_pilot_without_power_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grid_file = planned(tmp_path, [{"quote": "A beats B", "better": ["A", "B"]}])
    assert main(["experiment", str(grid_file), "--pilot", str(grid_file), "--dry-run"]) == 2
    assert "--pilot names the pilot grids of --power; give --power too" in capsys.readouterr().err


def test_two_pilot_files_of_one_grid_count_its_runs_once(tmp_path: Path) -> None:
    """Two grid files with one name side by side share their folder, results/NAME: their pilot pairs are the same
    runs, counted once (as is a pilot given twice)."""
    pilot_file = pilot(tmp_path / "pilot")
    twin = shutil.copy(pilot_file, pilot_file.with_name("twin.yaml"))
    grid_file = planned(tmp_path / "new", [{"quote": "A beats B", "better": ["A", "B"]}])
    for pilots in ([pilot_file, twin], [pilot_file, pilot_file]):
        table = power(str(grid_file), *(f"--pilot={path}" for path in pilots))
        assert "1 pairs of 1 grids" in table, table
