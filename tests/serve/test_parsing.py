"""Hostile requests get their documented status and one clear message, and the server answers afterwards:
oversized bodies 413, bad bytes or JSON 400, wrong types 422, 5,000-character lines cut with warnings, an empty
list 200, 10,000 sentences 413."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adlnmt.inference.translator import Translator
from adlnmt.serve.parsing import cut_long
from serve.server import ClientFactory

JSON = {"Content-Type": "application/json"}
LONG_LINE = ("ein kleiner Hund läuft über die grüne Wiese . " * 120)[:5000]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"x" * 1_000_001, 413, "request body of 1,000,001 bytes exceeds the server's limit of 1,000,000 bytes"),
        (b'{"text": ["a"]', 400, "request body is not valid JSON: Expecting ',' delimiter at line 1 column 15"),
        (b"", 400, "request body is not valid JSON: Expecting value at line 1 column 1"),
        (b'{"text": ["\xff\xfe caf\xe9"]}', 400, "request body is not valid UTF-8 (byte 11: b'\\xff')"),
        (b"[" * 200_000 + b"]" * 200_000, 400, "request body is not valid JSON: nested too deeply"),
        (b'{"text": ["a"], "beam": ' + b"9" * 5000 + b"}", 400, "request body is not valid JSON: a number too long"),
        (b'{"text": ["ok", "\\ud800"]}', 422, "invalid request: text.1: a lone surrogate (U+D800) at character 1, not "
         "a Unicode character"),
        (b'["a", "b"]', 422, 'expected a JSON object like {"text": ["..."]}, got list'),
        (b'{"text": 7}', 422, "invalid request: text: Input should be a valid list"),
        (b'{"text": ["a", 7]}', 422, "invalid request: text.1: Input should be a valid string"),
        (b'{"text": ["a"], "beam": "5"}', 422, "invalid request: beam: Input should be a valid integer"),
        (b'{"text": ["a"], "beam": 0}', 422, "invalid request: beam: Input should be greater than or equal to 1"),
        (b'{"text": ["a"], "beam": 2, "nbest": 3}', 422, "invalid request: body: Value error, nbest (3) must be "
         "at most beam (2)"),
        (b'{"text": ["a"], "beam": 17}', 422, "invalid request: beam 17 exceeds the server's max_beam 16"),
        (b'{"text": ["a"], "alignments": "yes"}', 422, "invalid request: alignments: Input should be a valid boolean"),
        (b'{"text": ["a"], "beams": 5}', 422, "invalid request: beams: Extra inputs are not permitted"),
        (b'{"beam": 5}', 422, "invalid request: text: Field required"),
    ],
)  # fmt: skip
def test_bad_requests_get_a_status_and_one_message(
    make_client: ClientFactory, body: bytes, status: int, message: str
) -> None:
    with make_client() as client:
        reply = client.post("/translate", content=body, headers=JSON)
        assert (reply.status_code, reply.json()["error"]) == (status, message)
        assert client.get("/health").status_code == 200


def test_hostile_requests_in_a_row_leave_the_server_answering(
    make_client: ClientFactory, translator: Translator, test_lines: list[str]
) -> None:
    with make_client() as client:
        oversized = client.post("/translate", content=b'{"text": ["' + b"a" * 2_000_000 + b'"]}', headers=JSON)
        invalid = client.post("/translate", content=b"{text: nope}", headers=JSON)
        bad_bytes = client.post("/translate", content=b'{"text": ["\xc3\x28"]}', headers=JSON)
        long_lines = client.post("/translate", json={"text": [LONG_LINE, test_lines[0], LONG_LINE], "beam": 2})
        empty = client.post("/translate", json={"text": []})
        flood = client.post("/translate", json={"text": ["ein Hund ."] * 10_000})
        health = client.get("/health")
        after = client.post("/translate", json={"text": test_lines[:1]})
    assert [r.status_code for r in (oversized, invalid, bad_bytes, long_lines, empty, flood, health, after)] == [
        413, 400, 400, 200, 200, 413, 200, 200]  # fmt: skip
    assert flood.json()["error"] == "10,000 sentences in one request; the server takes at most 256"
    assert empty.json() == {"translations": [], "warnings": []}
    body = long_lines.json()
    cut = LONG_LINE[:1000]
    assert [t["source"] for t in body["translations"]] == [cut, test_lines[0], cut]
    expected = [f"input line {n}: 5,000 characters cut to 1,000 (the server's limit)" for n in (1, 3)]
    pieces = [translator.input_warning(cut, n) for n in (1, 3)]  # the CLI's own warning when pieces are cut too
    assert body["warnings"] == [w for pair in zip(expected, pieces, strict=True) for w in pair if w]
    assert all(t["translation"] for t in body["translations"][::2])


def test_a_plain_string_is_one_sentence(make_client: ClientFactory, test_lines: list[str]) -> None:
    with make_client() as client:
        one = client.post("/translate", json={"text": test_lines[0]})
        listed = client.post("/translate", json={"text": [test_lines[0]]})
    assert one.status_code == listed.status_code == 200 and one.json() == listed.json()


def test_a_streamed_body_is_cut_off_at_the_limit(make_client: ClientFactory) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is counted while the body arrives
        yield b'{"text": ["'
        for _ in range(100):
            yield b"a" * 1000
        yield b'"]}'

    with make_client(max_body_bytes=50_000) as client:
        reply = client.post("/translate", content=chunks(), headers=JSON)
        assert reply.status_code == 413
        assert reply.json()["error"] == "request body exceeds the server's limit of 50,000 bytes"
        assert client.get("/health").status_code == 200


def test_sentence_limit_and_character_limit_are_the_servers(make_client: ClientFactory) -> None:
    with make_client(max_sentences=3, max_chars=5) as client:
        four = client.post("/translate", json={"text": ["a", "b", "c", "d"]})
        three = client.post("/translate", json={"text": ["ein Hund", "a", ""], "beam": 1})
    assert (four.status_code, four.json()["error"]) == (413, "4 sentences in one request; the server takes at most 3")
    assert three.status_code == 200
    assert three.json()["warnings"] == ["input line 1: 8 characters cut to 5 (the server's limit)"]
    assert [t["source"] for t in three.json()["translations"]] == ["ein H", "a", ""]


def test_cut_long_cuts_by_characters_not_bytes() -> None:
    assert cut_long(["äöü", "äöüß!"], 4) == (["äöü", "äöüß"], [None, "input line 2: 5 characters cut to 4 (the "
                                                                   "server's limit)"])  # fmt: skip
