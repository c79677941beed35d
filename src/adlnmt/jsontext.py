"""The one JSON parser of adlnmt's readers (config.json, manifests, records, suites, HTTP bodies): ``json.loads``
with bounds, so that no file or request turns into a traceback.

:func:`parse_json` refuses, each with a :class:`JsonError` (a ValueError) whose message says what is wrong:
text that is not JSON (with line and column), nesting deeper than :data:`MAX_DEPTH` levels (``json.loads`` would
recurse until a RecursionError), a number of more digits than Python converts, a string with a lone surrogate
(a ``"\\ud800"`` escape: valid JSON, but not a Unicode character, so no tokenizer or UTF-8 file takes it), and an
object with a key given twice (``json.loads`` keeps the last value, so the first would be lost in silence); with
``non_finite=False`` also ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON by RFC 8259; Python's json writes them for
non-finite floats, as in a diverged run's metrics records, which adlnmt reads back). A leading byte order mark is
ignored, as adlnmt's text readers ignore it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

MAX_DEPTH = 100  # levels of nested arrays and objects; adlnmt's own files use fewer than 10
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_NON_FINITE = re.compile(r"NaN|-?Infinity")


class JsonError(ValueError):
    """Text that :func:`parse_json` refuses: why (``reason``) and, for a syntax error, where (1-based ``line`` and
    ``column``)."""

    def __init__(self, reason: str, line: int | None = None, column: int | None = None) -> None:
        at = "" if reason.endswith(" at") else " at"  # json's "Unterminated string starting at" ends with it
        super().__init__(reason if line is None else f"{reason}{at} line {line} column {column}")
        self.reason = reason
        self.line = line
        self.column = column


class LoneSurrogate(JsonError):
    """JSON whose string (or key) at ``where`` (a dotted path such as ``text.1``; None: the top level) holds a lone
    surrogate: valid JSON, not valid text."""

    def __init__(self, message: str, where: str | None = None) -> None:
        super().__init__(message)
        self.where = where


def type_name(value: Any) -> str:
    """The JSON name of ``value``'s type (``a list``, ``null``), for messages."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return (
        "null" if value is None else next((n for t, n in names.items() if isinstance(value, t)), type(value).__name__)
    )


def too_deep(text: str) -> bool:
    """Whether JSON ``text`` nests arrays and objects deeper than :data:`MAX_DEPTH` (brackets in strings do not
    count)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # cannot be deeper: no need to scan
        return False
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_DEPTH:
            return True
    return False


def _surrogate_at(text: str) -> int | None:
    """The index of the first lone surrogate in ``text``, or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return err.start
    return None


def lone_surrogate(value: Any, where: str = "") -> LoneSurrogate | None:
    """The error for the first string (or key) in ``value`` (parsed JSON) holding a lone surrogate, or None;
    ``where``: the dotted path of ``value`` (``text.1``)."""
    if isinstance(value, str):
        if (at := _surrogate_at(value)) is None:
            return None
        code = f"U+{ord(value[at]):04X}"
        return LoneSurrogate(f"{where or 'the value'}: a lone surrogate ({code}) at character {at + 1}, not a Unicode "
                             "character", where or None)  # fmt: skip
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and (at := _surrogate_at(key)) is not None:
            return LoneSurrogate(f"{where or 'the object'}: a key with a lone surrogate (U+{ord(key[at]):04X}), not a "
                             "Unicode character", where or None)  # fmt: skip
        if (found := lone_surrogate(item, f"{where}.{key}" if where else str(key))) is not None:
            return found
    return None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's ``pairs`` as a dict, or a :class:`JsonError` naming a key given twice."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise JsonError(f"key {twice!r} given twice in one object")
    return value


class _NonFinite(Exception):
    """A ``NaN``, ``Infinity`` or ``-Infinity`` that :func:`parse_json` was told to refuse."""


def _refuse_non_finite(name: str) -> Any:
    raise _NonFinite(name)


def _non_finite_error(text: str, name: str) -> JsonError:
    """The error for ``name`` (``NaN``, ``Infinity`` or ``-Infinity``), at its first place outside strings in
    ``text`` (the one the parser met first: the text before it is valid JSON), line and column as ``json.loads``
    counts them."""
    blanked = _STRING.sub(lambda string: " " * len(string.group()), text)  # same offsets; strings hold no newline
    reason = f"{name} is not a JSON value (RFC 8259 has no NaN or Infinity)"
    if (found := _NON_FINITE.search(blanked)) is None:  # not reached: the parser met one
        return JsonError(reason)
    at = found.start()
    return JsonError(reason, text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at))


def parse_json(text: str | bytes, non_finite: bool = True) -> Any:
    """``json.loads(text)``, or a :class:`JsonError` saying why not (see the module's docstring); bytes must be
    UTF-8; ``non_finite=False`` refuses ``NaN``, ``Infinity`` and ``-Infinity`` (strict RFC 8259, e.g. for HTTP
    bodies)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            raise JsonError(f"not UTF-8 (byte {err.start}: {text[err.start : err.start + 1]!r})") from None
    text = text.removeprefix("\ufeff")  # a byte order mark: RFC 8259 lets a parser ignore it (json.loads refuses it)
    if too_deep(text):
        raise JsonError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys,
                           parse_constant=None if non_finite else _refuse_non_finite)  # fmt: skip
    except _NonFinite as err:
        raise _non_finite_error(text, str(err)) from None
    except json.JSONDecodeError as err:
        raise JsonError(err.msg, err.lineno, err.colno) from None
    except JsonError:  # a key given twice
        raise
    except RecursionError:  # not reached past the depth check; kept so that no input can give a traceback
        raise JsonError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # an integer of more digits than Python converts (its message names interpreter settings)
        raise JsonError("a number too long") from None
    if _SURROGATE_ESCAPE.search(text) and (error := lone_surrogate(value)) is not None:
        raise error
    return value


def read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in the file ``path``, or None when the file is missing, unreadable, not JSON or not an object
    (a record a crash left unwritten; readers that must name a damaged file use
    :func:`adlnmt.store.atomic.read_json_object`)."""
    try:
        value = parse_json(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
