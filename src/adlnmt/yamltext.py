"""The one YAML reader of adlnmt's input files (grid files, ``adlnmt train --config``): ``yaml.safe_load`` that
turns every problem into a :class:`~adlnmt.errors.UserError` naming the file and line, never a traceback.

Beyond what PyYAML refuses it refuses a mapping that gives one key twice: YAML keeps the last value silently, so
``beam: 2`` and a later ``beam: 7`` in one section would train with 7 and leave the 2 standing in the file. Keys a
merge (``<<: *defaults``) brings in may be given again: that is what a merge is for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from adlnmt.errors import UserError

MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKey(yaml.YAMLError):
    """A key given twice in one mapping: the line of each (1-based)."""

    def __init__(self, key: object, line: int, first: int) -> None:
        super().__init__(f"duplicate key {key!r} (first given at line {first}; YAML would keep only the last)")
        self.line = line


class _UniqueKeys(yaml.SafeLoader):
    """``yaml.SafeLoader`` refusing a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise DuplicateKey(key, line, seen[key])
                seen[key] = line
            except TypeError:  # an unhashable key: the base constructor says so
                continue
        return super().construct_mapping(node, deep)


def read_yaml_file(path: Path) -> Any:
    """The YAML document in ``path`` (None when it is empty); a UserError naming the file (and line) otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: invalid UTF-8") from None
    try:
        return yaml.load(text, Loader=_UniqueKeys)
    except DuplicateKey as err:
        raise UserError(f"{path}:{err.line}: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise UserError(f"{path}{line}: invalid YAML: {getattr(err, 'problem', err)}") from None
    except RecursionError:
        raise UserError(f"{path}: invalid YAML: nested too deeply") from None
