"""Claims judged on runs (:mod:`adlnmt.experiment.judge`: claims.md, claims.json): which runs enter, per test set;
the marks for runs that did not converge, claims out of scope and claims registered after results; and the
registration of the shipped claims, checked against the repository's history."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from adlnmt.experiment.grid import load_grid
from adlnmt.experiment.judge import Judge, write_claims
from adlnmt.experiment.results import RESULT_FILE
from adlnmt.experiment.runner import plan_runs
from adlnmt.verdicts import claims as claims_module
from adlnmt.verdicts.claims import detectable_effect, effect, p_values, relation, seed_list
from adlnmt.verdicts.statistics import (
    CLAIM_RESAMPLES,
    FAILS,
    HOLDS,
    KINDS,
    NO_SPREAD,
    NOT_CONVERGED,
    ONE_SEED,
    OUT_OF_SCOPE,
    holm,
)

from .sample_results import machine, run_result, scored

REPOSITORY = Path(__file__).resolve().parents[2]
REFERENCES = [f"a photo of {n} people walking along the {place}" for n in ("two", "three", "four", "five", "six")
              for place in ("beach", "street", "river", "road", "park", "hill")]  # fmt: skip
WORSE = [line.replace("people", "dogs").replace("along", "near") for line in REFERENCES]
CONVERGED = (10.0, 11.0, 12.0, 13.0)  # validation perplexities, one per 100 updates
IMPROVING = (20.0, 15.0, 10.0)


VARIANTS = (("A", "transformer-aan"), ("B", "transformer-small"))


def make_grid(tmp_path: Path, claims: list[dict], tests: tuple[str, ...] = ("t",), variants=VARIANTS) -> Any:
    (tmp_path / "ref.txt").write_text("\n".join(REFERENCES) + "\n")
    (tmp_path / "src.txt").write_text("\n".join(REFERENCES) + "\n")
    files = {f"{s}_{side}": "ref.txt" for s in ("train", "valid") for side in ("src", "tgt")}
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text(yaml.safe_dump({
        "name": "g", "seeds": [1, 2], "data": files, "bootstrap_resamples": 500,
        "test": [{"name": name, "src": "src.txt", "ref": "ref.txt"} for name in tests],
        "train": {"d_model": 32, "heads": 4, "patience": 3},
        "variants": [{"name": name, "preset": preset} for name, preset in variants],
        "claims": claims,
    }))  # fmt: skip
    return load_grid(grid_file)


def write_runs(grid: Any, out: Path, runs: dict[tuple[str, int], dict[str, Any]]) -> list:
    """Results for the planned runs given in ``runs``: (variant, seed) → hypotheses per test set and options."""
    planned = plan_runs(grid, out)
    for run in planned:
        spec = runs.get((run.variant.name, run.seed))
        if spec is None:
            continue
        run.dir.mkdir(parents=True, exist_ok=True)
        for test, lines in spec["tests"].items():
            (run.dir / "hyp").mkdir(exist_ok=True)
            (run.dir / "hyp" / f"{test}.txt").write_text("\n".join(lines) + "\n")
        tests = {test: scored(sentences_per_s=spec.get("speed", 10.0), name=test) for test in spec["tests"]}
        on = machine(capability=spec.get("capability", "AVX2"), date=spec.get("date", "2026-11-25T12:00:00+00:00"))
        result = run_result(run.seed, spec.get("ppls", CONVERGED), on, fingerprint=run.fingerprint, tests=tests,
                            **spec.get("result", {}))  # fmt: skip
        result.save(run.dir / RESULT_FILE)
    return plan_runs(grid, out)


def both(good: list[str], bad: list[str], **options: Any) -> dict[tuple[str, int], dict[str, Any]]:
    return {**{("A", s): {"tests": {"t": good}, **options} for s in (1, 2)},
            **{("B", s): {"tests": {"t": bad}, **options} for s in (1, 2)}}  # fmt: skip


def test_a_better_system_holds_and_the_reverse_claim_does_not(tmp_path: Path) -> None:
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"]},
                                {"quote": "B beats A", "better": ["B", "A"]}])  # fmt: skip
    judged = Judge(grid, write_runs(grid, tmp_path / "out", both(REFERENCES, WORSE))).judge_all()
    assert [j.verdict for j in judged] == [HOLDS, FAILS]
    assert judged[0].tested.effect == pytest.approx(-judged[1].tested.effect) and judged[0].tested.effect > 20
    assert seed_list(judged[0]) == "1, 2" and judged[0].adjusted_p == pytest.approx(2 * judged[0].tested.p_value)


def test_a_larger_gain_compares_two_steps(tmp_path: Path) -> None:
    """(A − B) > (B − A): a chain whose middle row is named twice (drawn once, weight 2); twice the better effect."""
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"]},
                                {"quote": "B to A gains more than A to B", "larger_gain": [["A", "B"], ["B", "A"]]},
                                {"quote": "A to B gains more", "larger_gain": [["B", "A"], ["A", "B"]]}])  # fmt: skip
    better, larger, smaller = Judge(grid, write_runs(grid, tmp_path / "out", both(REFERENCES, WORSE))).judge_all()
    assert relation(larger.claim) == "(A − B) > (B − A)"
    assert larger.tested.effect == pytest.approx(2 * better.tested.effect) and larger.means[0] == -larger.means[1]
    assert (larger.verdict, smaller.verdict) == (HOLDS, FAILS)
    runs = both(REFERENCES, WORSE)
    del runs[("B", 2)]
    assert Judge(grid, write_runs(grid, tmp_path / "other", runs)).judge_all()[1].verdict == ONE_SEED


def test_unconverged_runs_and_out_of_scope_claims_are_marked(tmp_path: Path) -> None:
    scoped = {"quote": "A beats B (WMT only)", "better": ["A", "B"], "out_of_scope": "not IWSLT"}
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"]}, scoped])
    runs = both(REFERENCES, WORSE)
    runs[("B", 2)]["ppls"] = IMPROVING  # best at its last validation: not converged
    judged = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
    assert (judged[0].verdict, judged[0].measured, judged[0].unconverged) == (NOT_CONVERGED, HOLDS, ("B seed 2",))
    assert (judged[1].verdict, judged[1].measured, judged[1].adjusted_p) == (OUT_OF_SCOPE, HOLDS, None)
    assert judged[0].adjusted_p == judged[0].tested.p_value  # alone in the family: the out-of-scope claim is not in it
    write_claims(grid, write_runs(grid, tmp_path / "out", runs), tmp_path)
    text = (tmp_path / "claims.md").read_text()
    assert "**inconclusive: not converged** (B seed 2; the runs as they are: holds)" in text
    assert "**out of scope at this data size** (not IWSLT; measured: holds)" in text


def test_a_not_converged_verdict_also_names_a_row_of_one_seed(tmp_path: Path) -> None:
    """Both causes of *inconclusive*: the multilingual grid read "not converged" alone, its rows of one seed unsaid."""
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"]}])
    runs = both(REFERENCES, WORSE)
    del runs[("B", 2)]
    runs[("B", 1)]["ppls"] = IMPROVING  # not converged, and B's only seed
    write_claims(grid, write_runs(grid, tmp_path / "out", runs), tmp_path)
    (record,) = json.loads((tmp_path / "claims.json").read_text())["claims"]
    assert (record["verdict"], record["measured"], record["also_one_seed"]) == (NOT_CONVERGED, HOLDS, True)
    text = (tmp_path / "claims.md").read_text()
    assert (
        "**inconclusive: not converged** (B seed 1; also inconclusive: one seed; the runs as they are: holds)" in text
    )


def test_runs_without_a_later_test_set_leave_it_to_the_seeds_that_have_it(tmp_path: Path) -> None:
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"]}], tests=("t", "later"))
    runs = both(REFERENCES, WORSE)
    runs[("A", 2)]["tests"]["later"] = REFERENCES  # only seed 2 of A and seed 1 of B were scored on it
    runs[("B", 1)]["tests"]["later"] = WORSE
    judged = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
    assert [(j.test, j.primary, seed_list(j)) for j in judged] == [("t", True, "1, 2"), ("later", False, "A 2; B 1")]
    assert [(j.verdict, j.measured) for j in judged] == [(HOLDS, HOLDS), (ONE_SEED, HOLDS)]  # one seed a row there
    write_claims(grid, write_runs(grid, tmp_path / "out", runs), tmp_path)
    assert "**inconclusive: one seed** (the statistics alone: holds)" in (tmp_path / "claims.md").read_text()
    record = json.loads((tmp_path / "claims.json").read_text())["claims"][0]
    assert (record["test"], record["seed_list"], record["other_tests"][0]["seed_list"]) == ("t", "1, 2", "A 2; B 1")


def test_a_claim_registered_after_some_results_names_their_seeds(tmp_path: Path) -> None:
    registered = "abc1234 2026-11-26T08:00:00+00:00"
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"], "registered": registered}])
    runs = both(REFERENCES, WORSE, date="2026-11-27T08:00:00+00:00")
    runs[("B", 1)]["date"] = "2026-11-25T08:00:00+00:00"  # evaluated before the claim was registered
    (judged,) = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
    assert judged.after_results == ("B seed 1",)  # A's runs came after the claim: not named
    write_claims(grid, write_runs(grid, tmp_path / "out", runs), tmp_path)
    assert "| abc1234 (2026-11-26): after the results of B seed 1 |" in (tmp_path / "claims.md").read_text()


def test_speeds_timed_on_different_processors_are_not_compared(tmp_path: Path) -> None:
    grid = make_grid(tmp_path, [{"quote": "A is 4x faster", "faster": ["A", "B"], "ratio": 4}])

    def judged(capabilities: dict[tuple[str, int], str], speed: float = 50.0) -> tuple:
        runs = {(v, s): {"tests": {"t": REFERENCES}, "speed": speed if v == "A" else 10.0 + s / 10,
                         "capability": capabilities[(v, s)]} for v in ("A", "B") for s in (1, 2)}  # fmt: skip
        (j,) = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
        return j.seeds[0], j.apart, j.verdict

    same = {(v, s): "AVX2" for v in ("A", "B") for s in (1, 2)}
    assert judged(same) == ((1, 2), (), HOLDS)  # ~5x on both seed pairs
    assert judged(same, speed=12.0) == ((1, 2), (), FAILS)
    assert judged({**same, ("A", 2): "AVX512"}) == ((1,), (2,), ONE_SEED)  # seed 2 not compared: one pair left
    assert judged({**same, ("A", 1): "AVX512", ("A", 2): "AVX512"})[1:] == ((1, 2), "not timed yet")


def test_one_pair_of_timings_is_a_point_estimate_with_no_test(tmp_path: Path) -> None:
    """A speed measured once per run with one seed pair left: its replicates cannot vary, so no interval, p or
    detectable effect is given, the statistics alone say nothing, and it takes no place in the Holm family."""
    grid = make_grid(tmp_path, [{"quote": "A is 4x faster", "faster": ["A", "B"], "ratio": 4},
                                {"quote": "A beats B", "better": ["A", "B"]}])  # fmt: skip
    mixed = [good if i % 3 else bad for i, (good, bad) in enumerate(zip(REFERENCES, WORSE, strict=True))]
    other = [bad if i % 2 else good for i, (good, bad) in enumerate(zip(REFERENCES, WORSE, strict=True))]
    runs = {(v, s): {"tests": {"t": mixed if v == "A" else other}, "speed": 50.0 if v == "A" else 10.0 + s}
            for v in ("A", "B") for s in (1, 2)}  # fmt: skip
    runs[("A", 2)]["capability"] = "AVX512"  # seed 2 timed on another processor: one pair left
    faster, better = write_claims(grid, write_runs(grid, tmp_path / "out", runs), tmp_path)
    assert 0.001 < better.tested.p_value < 0.5  # not certain: the Holm slot the point estimate would take matters
    assert (faster.seeds[0], faster.verdict, faster.measured) == ((1,), ONE_SEED, ONE_SEED)
    assert effect(faster) == "×4.55 (no interval: one seed a row and nothing below it to draw)"
    assert p_values(faster) == detectable_effect(faster) == "–" and faster.adjusted_p is None
    assert better.adjusted_p == pytest.approx(min(1.0, 2 * better.tested.p_value))  # the point estimate counts as p = 1
    row = next(line for line in (tmp_path / "claims.md").read_text().splitlines() if "4x faster" in line)
    assert "(the statistics alone" not in row
    record = json.loads((tmp_path / "claims.json").read_text())["claims"][0]
    assert record["interval"] is None and record["p"] is None and record["effect"] == pytest.approx(50 / 11)


def test_speeds_timed_hours_apart_are_not_compared(tmp_path: Path) -> None:
    """The same processor's speed drifts over hours: a seed pair compares only when timed within the hour."""
    grid = make_grid(tmp_path, [{"quote": "A is 4x faster", "faster": ["A", "B"], "ratio": 4}])

    def judged(b_seed_2_timed: str) -> tuple:
        runs = {(v, s): {"tests": {"t": REFERENCES}, "speed": 50.0 if v == "A" else 10.0 + s / 10,
                         "date": "2026-11-27T08:00:00+00:00"} for v in ("A", "B") for s in (1, 2)}  # fmt: skip
        runs[("B", 2)]["date"] = b_seed_2_timed
        (j,) = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
        return j.seeds[0], j.apart, j.verdict

    assert judged("2026-11-27T08:59:00+00:00") == ((1, 2), (), HOLDS)
    assert judged("2026-11-27T10:17:00+00:00") == ((1,), (2,), ONE_SEED)  # B's seed 2 timed 2 h 17 min later


def test_a_metric_measured_once_per_run(tmp_path: Path) -> None:
    grid = make_grid(tmp_path, [{"quote": "A has the lower validation loss", "better": ["A", "B"],
                                 "metric": "valid_ppl"}])  # fmt: skip
    runs = both(REFERENCES, REFERENCES)
    for seed in (1, 2):
        runs[("A", seed)]["ppls"] = tuple(ppl + (seed - 1.5) / 10 for ppl in CONVERGED)  # A's seeds ±0.05
        runs[("B", seed)]["ppls"] = tuple(ppl + 1 for ppl in CONVERGED)
    (judged,) = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
    assert judged.test == "validation" and judged.tested.effect == pytest.approx(1.0)  # lower is better
    assert judged.verdict == HOLDS  # 1.0 against a seed spread of 0.05 (t with 1 degree of freedom: p ≈ 0.03)
    for seed in (1, 2):  # every seed of each row the same: nothing to draw, nothing decided
        runs[("A", seed)]["ppls"] = CONVERGED
    (judged,) = Judge(grid, write_runs(grid, tmp_path / "out2", runs)).judge_all()
    assert judged.verdict == NO_SPREAD and judged.tested.effect == pytest.approx(1.0)


def _identity(item: dict[str, Any]) -> tuple:
    """A claim as registered: what it compares and how, not its provenance (``registered``, ``where``)."""
    kind = next(k for k in KINDS if k in item)
    rows = tuple(tuple(row) if isinstance(row, list) else row for row in item[kind])  # larger_gain: two steps
    test = tuple(item["test"]) if isinstance(item.get("test"), list) else item.get("test")  # pooled test sets
    return (str(item["quote"]).strip(), kind, rows, float(item.get("margin", item.get("tolerance", 0))),
            float(item.get("ratio", 1.0)), item.get("metric"), test, int(item.get("min_source_words", 0)),
            int(item.get("max_source_words", 0)), str(item.get("out_of_scope", "")).strip())  # fmt: skip


def _claims_at(commit: str, path: str) -> set[tuple]:
    shown = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=REPOSITORY, capture_output=True, text=True)
    return {_identity(c) for c in (yaml.safe_load(shown.stdout) or {}).get("claims") or []} if shown.returncode == 0 \
        else set()  # fmt: skip


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPOSITORY, capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize(
    "grid", ["adl-table5", "aan-table2", "comet-table1", "adl-table2", "adl-table3", "adl-table4", "efficiency"]
)
def test_every_shipped_claim_names_the_commit_that_registered_it(grid: str) -> None:
    """The commit a claim names holds the claim as it stands (the same comparison, margin and scope) and its parent
    does not; its date is that commit's. Editing a claim without registering it again fails here."""
    try:
        if _git("rev-parse", "--is-shallow-repository") != "false":
            pytest.skip("a shallow clone has no history to check against")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    from datetime import datetime

    path = f"experiments/{grid}.yaml"
    for item in yaml.safe_load((REPOSITORY / path).read_text(encoding="utf-8"))["claims"]:
        assert "registered" in item, f"{path}: claim {item['quote'][:60]!r} has no 'registered'"
        commit, date = item["registered"].split(" ")
        assert _identity(item) in _claims_at(commit, path), f"{commit} does not hold {item['quote'][:60]!r}"
        assert _identity(item) not in _claims_at(f"{commit}^", path), f"{item['quote'][:60]!r} is older than {commit}"
        assert datetime.fromisoformat(_git("show", "-s", "--format=%cI", commit)) == datetime.fromisoformat(date)


def test_a_run_in_another_arithmetic_enters_no_verdict_and_is_named(tmp_path: Path) -> None:
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"]}])
    runs = both(REFERENCES, WORSE)
    # a GPU run from before runs recorded TF32, of a model with a convolution: cuDNN's TF32 was on by default
    runs[("B", 2)]["result"] = {"device": "cuda:0", "canonical": {"encoder": "cnn(32)", "decoder": "ff(32)"}}
    (judged,) = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
    assert judged.seeds == ((1, 2), (1,))
    write_claims(grid, write_runs(grid, tmp_path / "out", runs), tmp_path)
    assert ("B seed 2 (CPU: TF32 allowed in cuDNN's convolutions and RNNs (PyTorch's default; the run predates the "
            "record)).") in (tmp_path / "claims.md").read_text()  # fmt: skip


@pytest.mark.parametrize(
    ("timed_alone", "busy_beside", "compared"),
    [(False, None, False), (True, 1.0, False), (True, 0.4, True), (None, None, True)],
)
def test_speeds_timed_beside_other_work_are_not_compared(
    tmp_path: Path, timed_alone: bool | None, busy_beside: float | None, compared: bool
) -> None:
    """Beside the grid's other training (``--decode-beside-training``) or while other processes kept more than half a
    core busy (measured): seed 2's pair is left out of the speed claim; a little background load is no reason."""
    grid = make_grid(tmp_path, [{"quote": "A is 4x faster", "faster": ["A", "B"], "ratio": 4}])
    runs = {
        (v, s): {"tests": {"t": REFERENCES}, "speed": 50.0 if v == "A" else 10.0} for v in ("A", "B") for s in (1, 2)
    }
    planned = write_runs(grid, tmp_path / "out", runs)
    beside = next(run for run in planned if (run.variant.name, run.seed) == ("A", 2))
    result = beside.result()
    timing = replace(result.tests["t"].timing, busy_beside=busy_beside)
    tests = {"t": replace(result.tests["t"], timing=timing)}
    replace(result, tests=tests, provenance=replace(result.provenance, timed_alone=timed_alone)).save(
        beside.dir / RESULT_FILE
    )
    (judged,) = Judge(grid, plan_runs(grid, tmp_path / "out")).judge_all()
    if compared:
        assert (judged.seeds[0], judged.beside) == ((1, 2), ())
        return
    assert (judged.seeds[0], judged.beside, judged.verdict) == ((1,), (2,), ONE_SEED)
    write_claims(grid, plan_runs(grid, tmp_path / "out"), tmp_path)
    assert "(not compared: seed 2, timed beside other work)" in (tmp_path / "claims.md").read_text()


def test_holm_families_are_fixed_at_registration(tmp_path: Path) -> None:
    """A family is the claims registered together (one commit) on a test set: a claim registered later, on other
    rows or not, does not join it, and a claim of the family whose runs have no results yet counts with p = 1, so
    that its results, when they come, do not grow the family."""
    first, later = "abc1234 2026-11-20T08:00:00+00:00", "def5678 2026-11-21T08:00:00+00:00"
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"], "registered": first},
                                {"quote": "B beats A", "better": ["B", "A"], "registered": first},
                                {"quote": "A beats B later", "better": ["A", "B"], "test": "later",
                                 "registered": first},
                                {"quote": "A beats B again", "better": ["A", "B"], "registered": later}],
                     tests=("t", "later"))  # fmt: skip
    judged = Judge(grid, write_runs(grid, tmp_path / "out", both(REFERENCES, WORSE))).judge_all()
    primary = {j.claim.quote: j for j in judged if j.primary}
    assert primary["A beats B later"].tested is None and primary["A beats B later"].family_size == 3
    ours = primary["A beats B"]
    assert (ours.family, ours.family_size) == ("abc1234, primary", 3)
    p_values = [ours.tested.p_value, primary["B beats A"].tested.p_value, 1.0]
    assert ours.adjusted_p == pytest.approx(holm(p_values)[0]) == pytest.approx(3 * ours.tested.p_value)
    again = primary["A beats B again"]
    assert (again.family_size, again.adjusted_p) == (1, again.tested.p_value)  # not in the earlier family
    runs = both(REFERENCES, WORSE)
    for (name, _), spec in runs.items():  # the later test set's results arrive: the family keeps its size
        spec["tests"]["later"] = REFERENCES if name == "A" else WORSE
    grown = Judge(grid, write_runs(grid, tmp_path / "out2", runs)).judge_all()
    assert {j.family_size for j in grown if j.family == "abc1234, primary"} == {3}


def test_a_family_on_another_test_set_counts_its_claims_not_measured_there_yet(tmp_path: Path) -> None:
    """On another test set too, a claim of the family whose rows have no results there yet counts with p = 1 (not
    listed): A beats B is judged on "later" in a family of 2, before and after C's results there arrive."""
    registered = "abc1234 2026-11-20T08:00:00+00:00"
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"], "registered": registered},
                                {"quote": "C beats B", "better": ["C", "B"], "registered": registered}],
                     tests=("t", "later"), variants=(*VARIANTS, ("C", "transformer-postnorm")))  # fmt: skip
    runs = {(name, s): {"tests": {"t": lines, "later": lines}} for name, lines in (("A", REFERENCES), ("B", WORSE))
            for s in (1, 2)}  # fmt: skip
    runs.update({("C", s): {"tests": {"t": REFERENCES}} for s in (1, 2)})
    judged = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
    (later,) = [j for j in judged if j.test == "later"]  # C beats B has no verdict there: not listed
    assert (later.claim.quote, later.family, later.family_size) == ("A beats B", "abc1234, later", 2)
    assert later.adjusted_p == pytest.approx(holm([later.tested.p_value, 1.0])[0])
    for s in (1, 2):
        runs[("C", s)]["tests"]["later"] = REFERENCES
    grown = Judge(grid, write_runs(grid, tmp_path / "out2", runs)).judge_all()
    assert sorted(j.family_size for j in grown if j.test == "later") == [2, 2]


def test_the_verdict_on_the_runs_after_registration_alone(tmp_path: Path) -> None:
    registered = "abc1234 2026-11-26T08:00:00+00:00"
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"], "registered": registered}])
    runs = both(REFERENCES, WORSE, date="2026-11-27T08:00:00+00:00")
    runs[("B", 1)]["date"] = "2026-11-25T08:00:00+00:00"  # before the registration: B has one later seed
    (judged,) = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
    assert (judged.verdict, judged.post_registration) == (HOLDS, ONE_SEED)
    write_claims(grid, write_runs(grid, tmp_path / "out", runs), tmp_path)
    assert (
        f"**holds** (on the runs evaluated after its registration alone: {ONE_SEED})"
        in (tmp_path / "claims.md").read_text()
    )
    on_time = both(REFERENCES, WORSE, date="2026-11-27T08:00:00+00:00")
    (judged,) = Judge(grid, write_runs(grid, tmp_path / "later", on_time)).judge_all()
    assert (judged.after_results, judged.post_registration) == ((), "")  # nothing before it: no second verdict
    for seed in (1, 2):  # every run of B before it: the rows without a later run are named
        runs[("B", seed)]["date"] = "2026-11-25T08:00:00+00:00"
    (judged,) = Judge(grid, write_runs(grid, tmp_path / "baseline-before", runs)).judge_all()
    assert judged.post_registration == "no run of B evaluated after it"


def test_the_verdict_after_registration_alone_gets_more_replicates_while_it_could_flip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verdict on the later runs alone follows every verdict's rule: judged again on twice the replicates while
    Monte Carlo error could still flip it (here every verdict counts as such below 4 times the least)."""
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"],
                                 "registered": "abc1234 2026-11-26T08:00:00+00:00"}])  # fmt: skip
    runs = both(REFERENCES, WORSE, date="2026-11-27T08:00:00+00:00")
    runs[("A", 1)]["date"] = "2026-11-25T08:00:00+00:00"
    judge = Judge(grid, write_runs(grid, tmp_path / "out", runs))
    least, calls, judge_once = judge.resamples, [], judge.judge
    monkeypatch.setattr(claims_module, "unsettled", lambda tested, p, family=1: tested.resamples < 4 * least)

    def counted(claim: Any, test: str, resamples: int | None = None, since: Any = None) -> Any:
        calls.append((since is not None, resamples or least))
        return judge_once(claim, test, resamples, since)

    monkeypatch.setattr(judge, "judge", counted)
    judge.judge_all()
    assert sorted(calls) == [(alone, times * least) for alone in (False, True) for times in (1, 2, 4)]


def test_the_p_carries_its_monte_carlo_error_and_the_minimum_detectable_effect(tmp_path: Path) -> None:
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"]},
                                {"quote": "A as B", "equivalent": ["A", "B"], "margin": 0.5}])  # fmt: skip
    mixed = [good if i % 2 else bad for i, (good, bad) in enumerate(zip(REFERENCES, WORSE, strict=True))]
    other = [bad if i % 2 else good for i, (good, bad) in enumerate(zip(REFERENCES, WORSE, strict=True))]
    better, same = Judge(grid, write_runs(grid, tmp_path / "out", both(mixed, other))).judge_all()
    assert better.tested.resamples >= CLAIM_RESAMPLES
    assert better.tested.p_error == pytest.approx((better.tested.p_value * (1 - better.tested.p_value)
                                                   / better.tested.resamples) ** 0.5)  # fmt: skip
    assert better.tested.mde > 0 and "not decidable at this size" in detectable_effect(same)


def test_with_one_seed_a_row_the_detectable_effect_is_a_lower_bound(tmp_path: Path) -> None:
    """One seed a row: the replicates hold the sentence level alone, so the MDE understates what the claim needs and
    an equivalence margin above it is not known to be decidable."""
    grid = make_grid(tmp_path, [{"quote": "A beats B", "better": ["A", "B"]},
                                {"quote": "A as B", "equivalent": ["A", "B"], "margin": 99.0}])  # fmt: skip
    runs = both(REFERENCES, WORSE)
    better, same = Judge(grid, write_runs(grid, tmp_path / "two", runs)).judge_all()
    assert detectable_effect(better).startswith("±") and "(decidable: ±99)" in detectable_effect(same)
    del runs[("B", 2)]
    better, same = Judge(grid, write_runs(grid, tmp_path / "one", runs)).judge_all()
    assert better.verdict == ONE_SEED
    assert detectable_effect(better) == f"at least ±{better.tested.mde:.2f} (one seed: sentences only)"
    assert "(not known: ±99)" in detectable_effect(same)


def test_a_pooled_claim_scores_the_test_sets_as_one_corpus(tmp_path: Path) -> None:
    """A claim on two test sets pooled: the corpus BLEU of the concatenation (not the mean of the two), the sentences
    of both drawn together; each test set also gets its own verdict, as any other test set of the grid."""
    import sacrebleu

    grid = make_grid(tmp_path, [{"quote": "A beats B on both", "better": ["A", "B"], "test": ["t", "u"]}],
                     tests=("t", "u"))  # fmt: skip
    half = len(REFERENCES) // 2
    few = REFERENCES[:half] + WORSE[half : half + 4] + REFERENCES[half + 4 :]  # B worse on 4 lines of u, 15 of t
    runs = {(row, seed): {"tests": {"t": lines[:half] + REFERENCES[half:], "u": few if row == "B" else REFERENCES}}
            for row, lines in (("A", REFERENCES), ("B", WORSE)) for seed in (1, 2)}  # fmt: skip
    judged = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
    pooled, *single = judged
    assert (pooled.test, pooled.primary, [j.test for j in single]) == ("t + u", True, ["t", "u"])
    b_pooled = WORSE[:half] + REFERENCES[half:] + few
    expected = 100.0 - sacrebleu.corpus_bleu(b_pooled, [REFERENCES + REFERENCES]).score
    assert pooled.tested.effect == pytest.approx(expected) and pooled.verdict == HOLDS
    on_u, on_t = sorted(j.tested.effect for j in single)
    assert on_u < expected < on_t  # the pooled corpus lies between its parts
    del runs[("A", 2)]["tests"]["u"]  # a run not evaluated on one of the pooled sets does not enter the pooled claim
    (tmp_path / "out2").mkdir()
    pooled = Judge(grid, write_runs(grid, tmp_path / "out2", runs)).judge_all()[0]
    assert pooled.seeds == ((1,), (1, 2))


def test_a_claim_on_its_own_test_set_alone(tmp_path: Path) -> None:
    """``own_test_only``: rows that translate different sources (one bilingual model per language) are compared on
    the claim's test set only, not judged again on the grid's other test sets; claims.json records the key where set."""
    grid = make_grid(tmp_path, [{"quote": "A beats B on t", "better": ["A", "B"], "test": "t", "own_test_only": True},
                                {"quote": "A beats B", "better": ["A", "B"]}], tests=("t", "u"))  # fmt: skip
    runs = {(row, seed): {"tests": {"t": lines, "u": lines}} for row, lines in (("A", REFERENCES), ("B", WORSE))
            for seed in (1, 2)}  # fmt: skip
    judged = Judge(grid, write_runs(grid, tmp_path / "out", runs)).judge_all()
    judged_on = [(j.claim.quote, j.test) for j in judged]
    assert judged_on == [("A beats B on t", "t"), ("A beats B", "t"), ("A beats B", "u")]
    assert grid.claims[0].fields()["own_test_only"] is True and "own_test_only" not in grid.claims[1].fields()
