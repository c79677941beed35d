"""Timing finished runs again on this machine: ``adlnmt experiment GRID --retime``.

A run's decoding speed is measured once, when it finishes, on the machine of that session; where the host changes
between sessions (this project's VM does), speeds compare only between runs timed on one processor
(:func:`adlnmt.experiment.report.timed_on`). Retiming translates the test sets of each selected finished run again,
one run after another in this process (so run it with nothing else running), with the weights, device, threads and
decoding options the run was evaluated with. The hypotheses must be the archived ones, else the run is left as it
was (other code or weights would be timed); then its speed figures are replaced, and the first timing is kept
under ``retimed.before``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from adlnmt.errors import UserError
from adlnmt.experiment.report import timed_on
from adlnmt.experiment.runner import Run, read_json, write_json
from adlnmt.store import ModelDir

SPEED_KEYS = ("decode_seconds", "sentences_per_s", "tokens_per_s", "buckets")  # of result["tests"][name]


def retime(run: Run) -> str:
    """Time ``run``'s test sets again and update its results where they are kept; what happened, in one line."""
    import torch

    from adlnmt.bench.machine import machine_record
    from adlnmt.experiment.worker import code_version, evaluate_test
    from adlnmt.inference.translator import Translator

    folder = run.finished_in()
    result, spec = read_json(folder / "result.json") if folder else None, read_json(run.dir / "run.json")
    if result is None:
        return f"skipped {run.label}: not finished"
    if spec is None or not ModelDir(run.model_dir).exists():
        return f"skipped {run.label}: its model is not on this machine ({run.model_dir})"
    device = result["device"]
    if device.startswith("cuda") and not torch.cuda.is_available():
        return f"skipped {run.label}: it was timed on {device}, and this machine has no GPU"
    torch.set_num_threads(result["threads"])
    try:
        translator = Translator.load(run.model_dir, result["checkpoint"], device)
    except (UserError, FileNotFoundError) as err:
        return f"skipped {run.label}: {err}"
    timed: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for test in spec["tests"]:
            timed[test["name"]] = evaluate_test(translator, test, spec, Path(scratch))
            again = (Path(scratch) / timed[test["name"]]["hypotheses"]).read_text(encoding="utf-8")
            if again != (folder / result["tests"][test["name"]]["hypotheses"]).read_text(encoding="utf-8"):
                return (
                    f"skipped {run.label}: its {test['name']} translation differs from the archived one (other "
                    "code or weights than the run was evaluated with): its speed would not be comparable"
                )
    previous = {name: {key: test[key] for key in SPEED_KEYS} for name, test in result["tests"].items()}
    first = result.get("retimed", {}).get("before") or {"machine": result["provenance"]["machine"], "tests": previous}
    for name, test in timed.items():
        result["tests"][name].update({key: test[key] for key in SPEED_KEYS})
    result["retimed"] = {"machine": machine_record(torch.device(device)), **code_version(), "before": first}
    for place in (run.archive, run.dir):
        kept = read_json(place / "result.json")
        if run.matches(kept):
            write_json(place / "result.json", result)
    speeds = ", ".join(f"{name} {previous[name]['sentences_per_s']:.1f} → {test['sentences_per_s']:.1f}"
                       for name, test in timed.items())  # fmt: skip
    return f"retimed {run.label}: sentences/s {speeds} on {timed_on(result)}"
