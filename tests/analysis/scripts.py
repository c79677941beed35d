"""The analysis scripts of experiments/analysis/ (not a package) loaded as modules for their tests."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

ANALYSIS = Path(__file__).resolve().parents[2] / "experiments" / "analysis"


def analysis_script(name: str) -> Iterator[ModuleType]:
    """experiments/analysis/NAME.py imported as module NAME for the test module's lifetime (a fixture's body)."""
    spec = importlib.util.spec_from_file_location(name, ANALYSIS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses resolve their annotations in their module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[name]
