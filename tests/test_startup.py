"""Start-up: the command line prints help and reports argument errors without importing PyTorch or the other
heavy packages (issue 46); tests/export/test_torch_free.py translates a CTranslate2 export without PyTorch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "sacrebleu", "fastapi", "ctranslate2", "onnxruntime", "matplotlib")
WATCHED = (*HEAVY, "numpy", "yaml", "adlnmt.train.config", "adlnmt.adl.parser")  # what run_cli reports as loaded
PROBE = f"""
import json, sys
from adlnmt.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print(json.dumps({{"code": code, "loaded": [m for m in {WATCHED!r} if m in sys.modules]}}), file=sys.stderr)
"""


def run_cli(argv: list[str]) -> tuple[int, list[str], subprocess.CompletedProcess[str]]:
    """``adlnmt ARGV`` in a fresh interpreter: its exit status, the modules of :data:`WATCHED` it imported, the
    process."""
    result = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=False)
    report = json.loads(result.stderr.strip().splitlines()[-1])
    return report["code"], report["loaded"], result


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["translate", "--help"],
        ["serve", "--help"],
        ["bench", "decode", "--help"],
        ["export", "--help"],
        ["experiment", "--help"],
        ["train", "--help"],
        ["average", "--help"],
    ],
)
def test_help_imports_nothing_heavy(argv: list[str]) -> None:
    code, loaded, result = run_cli(argv)
    assert code == 0 and "usage: adlnmt" in result.stdout
    assert not set(HEAVY) & set(loaded)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["translate", "--model", "m", "--beam", "five"], "expected an integer, got 'five'"),
        (["translate", "--model", "m", "--beam", "0"], "--beam: must be >= 1, got 0"),
        (["translate", "--model", "m", "--engine", "tensorflow"], "invalid choice: 'tensorflow'"),
        (["transate"], "invalid choice: 'transate'"),
    ],
)
def test_argument_errors_import_nothing_heavy(argv: list[str], message: str) -> None:
    code, loaded, result = run_cli(argv)
    assert code == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert not set(HEAVY) & set(loaded)


@pytest.mark.parametrize("module", ["adlnmt.adl", "adlnmt.inference", "adlnmt.inference.options"])
def test_torch_free_packages_import_nothing_heavy(module: str) -> None:
    """The ADL (parser, syntax, registry, errors) and the inference package's front door load without PyTorch; the
    layers and the builder are the first to need it."""
    probe = f"import json, sys, {module}; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == []
