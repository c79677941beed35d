"""Benchmark: start-up of the command line, before and after a change. Each command runs as a fresh process
``--repeat`` times (median wall seconds), the source trees alternating run by run so that both see the same load;
``python -X importtime`` once per command and tree gives the seconds spent importing and how much of it is torch.

    .venv/bin/python benchmarks/startup.py --model MODEL_DIR --export CT2_EXPORT --before OLD/src [--after src]

``--before``/``--after``: ``src`` directories put first on ``PYTHONPATH`` (e.g. ``git archive REV src | tar -x``).
Results: ``OUT/startup.json`` and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = "Ein Mann fährt auf einem Fahrrad die Straße entlang.\n"


def commands(model: Path, export: Path) -> dict[str, tuple[list[str], str]]:
    """Name → (adlnmt's arguments, its stdin)."""
    translate, ct2 = ["translate", "--beam", "5", "--threads", "2"], ["--engine", "ctranslate2"]
    return {
        "adlnmt --help": (["--help"], ""),
        "adlnmt translate --help": (["translate", "--help"], ""),
        "adlnmt serve --help": (["serve", "--help"], ""),
        "adlnmt bench decode --help": (["bench", "decode", "--help"], ""),
        "adlnmt experiment --help": (["experiment", "--help"], ""),
        "argument error (translate --beam 0)": (["translate", "--model", str(model), "--beam", "0"], ""),
        "translate 1 line, torch engine": ([*translate, "--model", str(model)], LINE),
        "translate 1 line, --engine ctranslate2": ([*translate, "--model", str(export), *ct2], LINE),
    }


def run(source: Path, argv: list[str], stdin: str, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "adlnmt", *argv]
    environment = {**os.environ, "PYTHONPATH": str(source)}
    return subprocess.run(command, input=stdin, capture_output=True, text=True, env=environment, check=False)


def import_seconds(stderr: str) -> tuple[float, float]:
    """All imports and torch's, in seconds, from ``-X importtime`` output: the cumulative times of the top-level
    imports (one space after the last ``|``; nested ones are indented further), and that of ``torch`` wherever it
    was first imported."""
    total = torch = 0.0
    for line in stderr.splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        seconds = int(parts[1]) / 1e6
        torch += seconds if parts[2].strip() == "torch" else 0.0
        total += 0.0 if parts[2].startswith("  ") else seconds  # nested: in its importer's cumulative time
    return total, torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a trained model directory")
    parser.add_argument("--export", type=Path, required=True, help="a CTranslate2 export of it")
    parser.add_argument("--before", type=Path, required=True, help="src directory of the old tree")
    parser.add_argument("--after", type=Path, default=ROOT / "src", help="src directory of the new tree")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "runs" / "startup")
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    table = commands(args.model, args.export)
    seconds: dict[tuple[str, str], list[float]] = {(name, tree): [] for name in table for tree in trees}
    loads = [os.getloadavg()[0]]
    for _ in range(args.repeat):
        for name, (argv, stdin) in table.items():
            for tree, source in trees.items():
                started = time.perf_counter()
                run(source, argv, stdin)
                seconds[name, tree].append(time.perf_counter() - started)
        loads.append(os.getloadavg()[0])
    rows = []
    for name, (argv, stdin) in table.items():
        row: dict[str, object] = {"command": name}
        for tree, source in trees.items():
            result = run(source, argv, stdin, importtime=True)
            imports, torch = import_seconds(result.stderr)
            row[tree] = {"median_s": statistics.median(seconds[name, tree]), "runs_s": seconds[name, tree],
                         "imports_s": imports, "torch_import_s": torch, "exit": result.returncode}  # fmt: skip
        rows.append(row)
    record = {"repeat": args.repeat, "cpus": os.cpu_count(), "load_1min": loads, "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"load (1-min average) during the runs: {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} CPUs")
    print("| command | before s (imports s, of which torch) | after s (imports s, of which torch) | speed-up |")
    print("|---|---:|---:|---:|")
    for row in rows:
        before, after = (row[tree] for tree in trees)
        assert isinstance(before, dict) and isinstance(after, dict)
        cells = [f"{t['median_s']:.2f} ({t['imports_s']:.2f}, {t['torch_import_s']:.2f})" for t in (before, after)]
        print(f"| {row['command']} | {cells[0]} | {cells[1]} | {before['median_s'] / after['median_s']:.1f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
