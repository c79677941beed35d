"""The one JSON parser of adlnmt's readers refuses hostile text with a message, never a traceback, and every JSON
reader of the project uses it (depth bound, lone surrogates, long numbers); the YAML readers bound nesting too."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from adlnmt.errors import UserError
from adlnmt.experiment.schema import read_yaml
from adlnmt.jsontext import MAX_DEPTH, JsonError, LoneSurrogate, parse_json, read_object
from adlnmt.store.atomic import read_records
from adlnmt.store.export_dir import read_manifest
from adlnmt.store.model_dir import ModelDir

SOURCE = Path(__file__).resolve().parents[1] / "src" / "adlnmt"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 200_000 + "]" * 200_000, f"nested deeper than {MAX_DEPTH} levels"),
        ('{"a": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}", f"nested deeper than {MAX_DEPTH} levels"),
        ("9" * 5000, "a number too long"),
        ('{"a" 1}', "Expecting ':' delimiter at line 1 column 6"),
        ('{\n  "a": "x', "Unterminated string starting at line 2 column 8"),  # not "starting at at"
        (b'{"a": "\xff"}', "not UTF-8 (byte 7: b'\\xff')"),
        ('{"a": [1, {"b": ["ok", "x\\udfff"]}]}', "a.1.b.1: a lone surrogate (U+DFFF) at character 2, not a Unicode "
         "character"),
        ('{"\\ud800": 1}', "the object: a key with a lone surrogate (U+D800), not a Unicode character"),
        ('"\\udc00"', "the value: a lone surrogate (U+DC00) at character 1, not a Unicode character"),
        ('{"a": 1, "b": [{"c": 1, "c": 2}]}', "key 'c' given twice in one object"),  # json.loads keeps the last
    ],
)  # fmt: skip
def test_hostile_json_is_one_message(text: str | bytes, message: str) -> None:
    with pytest.raises(JsonError) as raised:
        parse_json(text)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NaN", "NaN is not a JSON value (RFC 8259 has no NaN or Infinity) at line 1 column 1"),
        ('{"a": "NaN",\n "b": [1, -Infinity]}', "-Infinity is not a JSON value (RFC 8259 has no NaN or Infinity) at "
         "line 2 column 11"),
        ('["Infinity", Infinity]', "Infinity is not a JSON value (RFC 8259 has no NaN or Infinity) at line 1 "
         "column 14"),
    ],
)  # fmt: skip
def test_non_finite_constants_are_refused_on_request(text: str, message: str) -> None:
    """``non_finite=False`` (HTTP bodies) refuses Python's NaN and Infinity, which are not JSON; files keep them (a
    diverged run's metrics records hold NaN)."""
    with pytest.raises(JsonError) as raised:
        parse_json(text, non_finite=False)
    assert str(raised.value) == message
    assert json.dumps(parse_json(text)) == json.dumps(json.loads(text))  # the default reads them as json.loads does


def test_what_json_allows_is_read_as_json_reads_it() -> None:
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    inner = json.loads(deep[1:-1])  # one level less: it sits in an object
    text = json.dumps({"brackets in strings": "[[[[" * 100, "pair": "😀", "deep": inner, "n": 1e5}, ensure_ascii=False)
    assert parse_json(text) == json.loads(text) and parse_json(deep) == json.loads(deep)
    assert parse_json(r'"\ud83d\ude00"') == "😀"  # a surrogate pair is a character
    assert parse_json("\ufeff" + text) == json.loads(text) == parse_json(b"\xef\xbb\xbf" + text.encode())  # a BOM
    with pytest.raises(LoneSurrogate) as raised:
        parse_json('{"text": ["a", "\\ud800"]}')
    assert raised.value.where == "text.1"


def test_no_reader_calls_json_loads_itself() -> None:
    """Every JSON reader of src/adlnmt goes through parse_json (its bounds are the project's)."""
    calls = []
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("load", "loads")
                and getattr(node.value, "id", "") == "json"
            ):
                calls.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    assert calls == ["jsontext.py:" + str(_loads_line())]


def _loads_line() -> int:
    text = (SOURCE / "jsontext.py").read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(text, 1) if "json.loads(" in line and "value =" in line)


def test_the_project_readers_name_the_file(tmp_path: Path) -> None:
    deep = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    (tmp_path / "config.json").write_text(deep)
    with pytest.raises(UserError, match=r"config\.json: damaged \(nested deeper than 100 levels\)"):
        ModelDir(tmp_path).config()
    (tmp_path / "export.json").write_text('{"format": "\\udc00"}')
    with pytest.raises(UserError, match=r"export\.json: damaged \(invalid JSON: format: a lone surrogate \(U\+DC00\)"):
        read_manifest(tmp_path / "export.json")
    (tmp_path / "metrics.jsonl").write_text('{"update": 1}\n' + deep + '\n{"update": 2}\n')
    with pytest.raises(UserError, match=r"metrics\.jsonl:2: damaged record \(nested deeper than 100 levels\)"):
        read_records(tmp_path / "metrics.jsonl")
    (tmp_path / "grid.yaml").write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(UserError, match=r"grid\.yaml: invalid YAML: nested too deeply"):
        read_yaml(tmp_path / "grid.yaml", ("a",))


def test_read_object_is_none_for_a_record_that_is_not_there_or_not_whole(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    assert read_object(record) is None  # missing
    for damaged in ('{"update": 1', "[1, 2]", '"text"', "\xff", "[" * 5000 + "]" * 5000):
        record.write_bytes(damaged.encode("latin-1"))
        assert read_object(record) is None, damaged
    record.write_text('{"update": 1, "best": [2, 3]}')
    assert read_object(record) == {"update": 1, "best": [2, 3]}
    assert read_object(tmp_path) is None  # a folder
