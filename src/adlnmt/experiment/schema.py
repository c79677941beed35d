"""Typed access to a parsed YAML file whose every error names the file and the key path, e.g.
``grid.yaml: variants[2] ('RNN/RNN').train.d_modle: unknown training option (did you mean 'd_model'?)``."""

from __future__ import annotations

import difflib
import math
import os
from pathlib import Path
from typing import Any, NoReturn

from adlnmt.bounds import SEED_HIGH
from adlnmt.errors import UserError
from adlnmt.yamltext import read_yaml_file

KIND_NAMES = {float: "finite float"}  # what convert takes, where a type's name says less


def show(value: Any) -> str:
    return f"{type(value).__name__} {value!r}" if value is not None else "nothing"


def convert(value: Any, kinds: tuple[type, ...]) -> Any:
    """``value`` as the first of ``kinds`` it fits, else ValueError. A bool is never a number; a float may be given
    as an int or as a string such as '1e-3' (which YAML 1.1 reads as a string for want of a dot), and is finite
    (YAML's .nan and .inf compare false with every bound, passing any range check)."""
    for kind in kinds:
        if kind in (int, float) and isinstance(value, bool):
            continue
        if kind is float and isinstance(value, int | float | str):
            try:
                number = float(value)
            except (ValueError, OverflowError):
                continue
            if math.isfinite(number):
                return value if isinstance(value, float) else number
        elif isinstance(value, kind):
            return value
    raise ValueError(value)


class Reader:
    """Checks on the values of one file; ``where`` is the key path of the value checked."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> NoReturn:
        raise UserError(f"{self.path}: {where}: {message}" if where else f"{self.path}: {message}")

    def mapping(self, value: Any, where: str, allowed: tuple[str, ...] | dict[str, Any] | None = None) -> dict:
        """``value`` as a mapping whose keys are all ``allowed`` (any keys when None)."""
        if not isinstance(value, dict):
            self.fail(where, f"expected a mapping (key: value), got {show(value)}")
        for key in value:
            if allowed is not None and key not in allowed:
                self.unknown(f"{where}.{key}" if where else str(key), str(key), allowed)
        return value

    def unknown(self, where: str, key: str, allowed: Any, what: str = "key") -> NoReturn:
        close = difflib.get_close_matches(key, list(allowed), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else f"; expected one of: {', '.join(allowed)}"
        if not allowed:
            hint = "; there are none to choose from here"
        named = "" if where.endswith(key) else f" {key!r}"  # a value, not a key of the mapping at ``where``
        self.fail(where, f"unknown {what}{named}{hint}")

    def typed(self, value: Any, kind: type | tuple[type, ...], where: str) -> Any:
        """``value`` as ``kind`` (or the first of several kinds it fits), see ``convert``."""
        kinds = kind if isinstance(kind, tuple) else (kind,)
        try:
            return convert(value, kinds)
        except ValueError:
            self.fail(where, f"expected {' or '.join(KIND_NAMES.get(k, k.__name__) for k in kinds)}, got {show(value)}")

    def name(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(where, f"expected a non-empty name, got {show(value)}")
        return value.strip()

    def text(self, value: Any, where: str, empty: bool = False) -> str:
        """``value`` as text (stripped), not empty unless ``empty``: a list, mapping or number is refused (YAML reads
        ``[a]`` as a list and ``1.0`` as a number: quote such text)."""
        if not isinstance(value, str) or not (empty or value.strip()):
            self.fail(where, f"expected {'' if empty else 'non-empty '}text (in quotes where YAML would read it as "
                             f"something else), got {show(value)}")  # fmt: skip
        return value.strip()

    def path_value(self, value: Any, where: str) -> Path:
        """An absolute path: ``~`` and ``$VARS`` expanded, relative to the file's directory, ``..`` folded lexically
        (symbolic links kept: the runs' fingerprints name the data by the path the grid gives)."""
        if not isinstance(value, str) or not value.strip():
            self.fail(where, f"expected a file path, got {show(value)}")
        path = Path(os.path.expandvars(os.path.expanduser(value.strip())))
        return Path(os.path.abspath(path if path.is_absolute() else self.path.parent / path))

    def positive_ints(self, value: Any, where: str, increasing: bool = False) -> tuple[int, ...]:
        """Distinct integers in [1, 2³² - 1] (seeds: the range ``--seed`` takes; lengths: far below)."""
        if not isinstance(value, list) or not value:
            self.fail(where, f"expected a non-empty list of positive integers, got {show(value)}")
        numbers = tuple(self.typed(item, int, f"{where}[{i}]") for i, item in enumerate(value))
        for i, n in enumerate(numbers):
            if not 1 <= n <= SEED_HIGH:
                self.fail(f"{where}[{i}]", f"must be a positive integer of at most {SEED_HIGH}, got {n}")
        if len(set(numbers)) != len(numbers) or (increasing and list(numbers) != sorted(numbers)):
            self.fail(where, "values must be distinct" + (" and increasing" if increasing else ""))
        return numbers


def read_yaml(path: Path, keys: tuple[str, ...]) -> dict[str, Any]:
    """The top-level mapping of a YAML file, its keys checked against ``keys``."""
    if not path.is_file():
        raise UserError(f"{path}: {'a directory, not a file' if path.is_dir() else 'file not found'}")
    return Reader(path).mapping(read_yaml_file(path), "", keys)
