"""experiments/lane.sh: one commit a finished run (or a rerun), --retime only for runs the line itself finished, a
--rerun line trained once however often the lane starts again, and a --retime line committed as a retiming."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

LANE = Path(__file__).resolve().parents[2] / "experiments" / "lane.sh"
RESULT = "experiments/results/grid-cpu/runs/row/seed-1/result.json"
DISTILLED = "experiments/results/grid-cpu/distilled/distilled-row-seed-1"

# stands in for `python -m adlnmt experiment ARGS`: the first call finishes the run, --retime rewrites its result
FAKE_PYTHON = f"""#!/usr/bin/env bash
shift 3
if [[ " $* " == *" --retime "* ]]; then
    echo retime >> "$CALLS"
    [ -n "${{UNFINISHED:-}}" ] && echo "--retime: 1 timing(s) not taken in full or not alone" ||
        echo "--retime: every selected run timed again, alone"
    echo "{{\"retimed\": true${{RERUN:+, \"rerun\": {{}}}}}}" > {RESULT}  # a rerun's result keeps saying so
    exit 0
fi
echo run >> "$CALLS"
[ -z "${{STOPPED:-}}" ] || {{ echo "stopped by a signal: 1 run(s) not finished"; exit 0; }}  # as SIGTERM ends it
[ -e {RESULT} ] || {{ mkdir -p $(dirname {RESULT}) && echo '{{}}' > {RESULT}; }}
[ -z "${{RERUN:-}}" ] || echo '{{"rerun": {{"reproduced": false}}}}' > {RESULT}
[ -z "${{SPEED:-}}" ] || echo '{{}}' > $(dirname {RESULT})/speed.json
if [ -n "${{SLOW:-}}" ]; then  # a line of many runs: this one finished, the command goes on (the lane commits it)
    until git log --format=%s | grep -q "seed-1: finished"; do sleep 0.1; done  # the lane's timeout bounds it
    echo committed-while-running >> "$CALLS"
fi
[ -z "${{DISTILLED:-}}" ] || {{ mkdir -p {DISTILLED}/targets && echo "$DISTILLED" > {DISTILLED}/record.json &&
    echo "$DISTILLED" > {DISTILLED}/targets/000000.npy; }}
"""

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("bash", "git", "flock")), reason="needs bash, git and flock"
)


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=checkout, check=True, capture_output=True, text=True).stdout


@dataclass
class Lane:
    """A git checkout, a one-line queue and the fake adlnmt's call log."""

    checkout: Path
    queue: Path
    bin_dir: Path
    calls: Path

    def __call__(self, **environment: str) -> str:
        """Run the lane over its queue with RETIME matching the line (and ``environment`` for the fake); its
        stdout."""
        env = {
            **os.environ,
            **environment,
            "PYTHON": str(self.bin_dir / "python"),
            "RETIME": "grid",
            "CALLS": str(self.calls),
            "PATH": f"{self.bin_dir}:{os.environ['PATH']}",
        }
        done = subprocess.run(
            ["bash", str(LANE), "A", str(self.queue), str(self.checkout)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


@pytest.fixture
def lane(tmp_path: Path) -> Lane:
    checkout = tmp_path / "grid"
    checkout.mkdir()
    _git(checkout, "init", "-q")
    _git(checkout, "config", "user.email", "lane@example.org")
    _git(checkout, "config", "user.name", "lane test")
    (checkout / "README").write_text("grid\n")
    _git(checkout, "add", "README")
    _git(checkout, "commit", "-q", "-m", "start")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(FAKE_PYTHON)
    (bin_dir / "pgrep").write_text("#!/bin/sh\nexit 1\n")  # so that the lane stops no process of this machine
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    queue = tmp_path / "queue.txt"
    queue.write_text('grid.yaml --scale cpu --variants "row" --seeds 1\n')
    return Lane(checkout, queue, bin_dir, tmp_path / "calls.txt")


def test_a_finished_run_is_committed_and_retimed(lane: Lane) -> None:
    out = lane()
    assert "committed grid-cpu/runs/row/seed-1" in out and "committed the retiming" in out
    assert lane.calls.read_text().split() == ["run", "retime"]
    log = _git(lane.checkout, "log", "--format=%s").splitlines()
    assert log[0].startswith("retimed with the other lanes stopped (lane A)")
    assert log[1] == "grid-cpu/runs/row/seed-1: finished on this machine (nice 19; committed by lane A)"
    assert not _git(lane.checkout, "status", "--porcelain")


def test_a_run_is_committed_while_its_command_goes_on(lane: Lane) -> None:
    """A line of many runs (the students' rerun: about 16 hours) commits each run as it finishes, not at its end."""
    out = lane(SLOW="1", COMMIT_EVERY="1")
    assert lane.calls.read_text().split() == ["run", "committed-while-running", "retime"]
    assert out.count("committed grid-cpu/runs/row/seed-1") == 1 and "committed the retiming" in out  # retimed once
    assert not _git(lane.checkout, "status", "--porcelain")


def test_a_lane_started_again_does_not_retime_runs_finished_before(lane: Lane) -> None:
    lane()
    out = lane()
    assert "committed" not in out
    assert lane.calls.read_text().split() == ["run", "retime", "run"]


def test_a_speed_record_timed_after_its_run_was_committed_is_committed_without_a_retiming(lane: Lane) -> None:
    lane()
    out = lane(SPEED="1")  # the line's runs were finished before; the grid's speed: section timed them now
    assert "timed grid-cpu/runs/row/seed-1" in out and "committed grid-cpu" not in out
    assert lane.calls.read_text().split() == ["run", "retime", "run"]
    assert _git(lane.checkout, "log", "-1", "--format=%s").strip() == "grid-cpu/runs/row/seed-1: speed timed"
    assert not _git(lane.checkout, "status", "--porcelain")


def test_an_archived_distillation_is_committed_and_so_is_its_replacement(lane: Lane) -> None:
    out = lane(DISTILLED="first")
    assert "archived grid-cpu/distilled/distilled-row-seed-1" in out
    assert "grid-cpu/distilled/distilled-row-seed-1: distillation archived" in _git(lane.checkout, "log", "--format=%s")
    out = lane(DISTILLED="second")  # the step's distillation replaced (another teacher checkpoint, say)
    assert "archived grid-cpu/distilled/distilled-row-seed-1" in out
    assert _git(lane.checkout, "show", f"HEAD:{DISTILLED}/targets/000000.npy").strip() == "second"
    assert not _git(lane.checkout, "status", "--porcelain")


def test_a_run_trained_again_is_committed_and_a_result_edited_otherwise_is_not(lane: Lane) -> None:
    lane()
    (lane.checkout / RESULT).write_text('{"edited": true}\n')  # not by a run of this lane: left as it is
    out = lane()
    assert "committed" not in out and _git(lane.checkout, "status", "--porcelain").split() == ["M", RESULT]
    out = lane(RERUN="1")  # --rerun: the new result records what it replaced
    assert "committed grid-cpu/runs/row/seed-1 (trained again)" in out and "committed the retiming" in out
    log = _git(lane.checkout, "log", "--format=%s").splitlines()
    assert log[1] == "grid-cpu/runs/row/seed-1: trained again, finished on this machine (nice 19; committed by lane A)"
    assert not _git(lane.checkout, "status", "--porcelain")


def test_a_completed_rerun_line_is_not_run_again_when_the_lane_starts_again(lane: Lane) -> None:
    """A lane started again on its queue (the next session) would train a --rerun line's runs a third time."""
    lane.queue.write_text('grid.yaml --scale cpu --rerun --variants "row" --seeds 1\n')
    out = lane(RERUN="1", STOPPED="1")  # stopped by a signal (exit 0): not completed, so it runs again
    assert "stopped by a signal" in out and not Path(f"{lane.queue}.done").exists()
    lane(RERUN="1")
    assert Path(f"{lane.queue}.done").read_text() == lane.queue.read_text()
    out = lane(RERUN="1")
    assert "skipped: grid.yaml --scale cpu --rerun" in out and "delete the line there" in out
    assert lane.calls.read_text().split() == ["run", "run", "retime"]
    lane.queue.write_text('grid.yaml --scale cpu --variants "row" --seeds 1\n')  # without --rerun: runs every time
    lane()
    lane()
    assert lane.calls.read_text().split() == ["run", "run", "retime", "run", "run"]


def test_a_retime_line_is_committed_as_a_retiming_once_every_run_it_selects_is_timed(lane: Lane) -> None:
    """A queue line of its own with --retime (a seed's claim rows timed together): a rerun's result it times again is
    committed as a retiming, not as the run trained again; timed in full, the lane does not time it again."""
    (lane.checkout / RESULT).parent.mkdir(parents=True)
    (lane.checkout / RESULT).write_text('{"rerun": {}}\n')
    _git(lane.checkout, "add", RESULT)
    _git(lane.checkout, "commit", "-q", "-m", "a rerun")
    line = 'grid.yaml --scale cpu --retime --variants "row" --seeds 1'
    lane.queue.write_text(line + "\n")
    out = lane(RERUN="1", UNFINISHED="1")  # a run not timed (unfinished, busy machine): timed again next time
    assert "committed the retiming" in out and "trained again" not in out
    assert _git(lane.checkout, "log", "-1", "--format=%s").strip() == f"retimed (lane A): {line}"
    assert not Path(f"{lane.queue}.done").exists()
    lane(RERUN="1")
    assert Path(f"{lane.queue}.done").read_text() == line + "\n"
    out = lane(RERUN="1")
    assert "skipped: " + line in out
    assert lane.calls.read_text().split() == ["retime", "retime"]
    assert not _git(lane.checkout, "status", "--porcelain")


def test_a_retiming_commits_the_records_it_changed_and_not_a_run_set_aside_by_hand(lane: Lane) -> None:
    """A run folder whose files were deleted by hand (set aside to be trained again) is not committed with the
    retiming of another run (449dde8 committed five such deletions as "retimed")."""
    aside = "experiments/results/grid-cpu/runs/other/seed-2/result.json"
    for path in (RESULT, aside):
        (lane.checkout / path).parent.mkdir(parents=True)
        (lane.checkout / path).write_text("{}\n")
    _git(lane.checkout, "add", RESULT, aside)
    _git(lane.checkout, "commit", "-q", "-m", "two runs")
    (lane.checkout / aside).unlink()
    lane.queue.write_text('grid.yaml --scale cpu --retime --variants "row" --seeds 1\n')
    assert "committed the retiming" in lane()
    assert _git(lane.checkout, "show", "--name-only", "--format=", "HEAD").split() == [RESULT]
    assert _git(lane.checkout, "status", "--porcelain").split() == ["D", aside]
