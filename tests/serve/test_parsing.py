"""Hostile requests get their documented status and one clear message, and the server answers afterwards:
oversized bodies 413, bad bytes or JSON 400, wrong types 422, 5,000-character lines cut with warnings, an empty
list 200, 10,000 sentences 413."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest
from fastapi.testclient import TestClient

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
        (b"[" * 200_000 + b"]" * 200_000, 400, "request body is not valid JSON: nested deeper than 100 levels"),
        (b'{"text": ["a"], "x": ' + b"[" * 101 + b"]" * 101 + b"}", 400, "request body is not valid JSON: nested "
         "deeper than 100 levels"),
        (b'{"text": ["a"], "beam": ' + b"9" * 5000 + b"}", 400, "request body is not valid JSON: a number too long"),
        (b"NaN", 400, "request body is not valid JSON: NaN is not a JSON value (RFC 8259 has no NaN or Infinity) at "
         "line 1 column 1"),
        (b'{"text": ["a"], "beam": -Infinity}', 400, "request body is not valid JSON: -Infinity is not a JSON value "
         "(RFC 8259 has no NaN or Infinity) at line 1 column 25"),
        (b'{"text": ["ok", "\\ud800"]}', 422, "invalid request: text.1: a lone surrogate (U+D800) at character 1, not "
         "a Unicode character"),
        (b'{"text": ["ok"], "prefix": ["a\\udc00"]}', 422, "invalid request: prefix.0: a lone surrogate (U+DC00) at "
         "character 2, not a Unicode character"),
        (b'{"text": ["ok"], "\\udc00": 1}', 422, "invalid request: the object: a key with a lone surrogate (U+DC00), "
         "not a Unicode character"),
        (b'\xef\xbb\xbf{"text": ["a"], "beam": 0}', 422, "invalid request: beam: Input should be greater than or equal "
         "to 1"),  # a UTF-8 byte order mark before the JSON is ignored (RFC 8259), as in files
        (b'{"text": ["a"], "text": ["b"]}', 400, "request body is not valid JSON: key 'text' given twice in one "
         "object"),
        (b'["a", "b"]', 422, 'expected a JSON object like {"text": ["..."]}, got a list'),
        (b"null", 422, 'expected a JSON object like {"text": ["..."]}, got null'),  # JSON's names, not Python's
        (b'{"text": 7}', 422, "invalid request: text: Input should be a valid list"),
        (b'{"text": ["a", 7]}', 422, "invalid request: text.1: Input should be a valid string"),
        (b'{"text": ["a"], "beam": "5"}', 422, "invalid request: beam: Input should be a valid integer"),
        (b'{"text": ["a"], "beam": 0}', 422, "invalid request: beam: Input should be greater than or equal to 1"),
        (b'{"text": ["a"], "beam": 2, "nbest": 3}', 422, "invalid request: body: nbest (3) must be at most "
         "beam (2)"),
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
    # the model's own warning where the pieces are cut too
    pieces = [translator.input_warning(translator.encode_line(cut), n) for n in (1, 3)]
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


def test_a_beam_wider_than_the_vocabulary_names_the_request_field(make_client: ClientFactory) -> None:
    """The 422 names the JSON field ``beam``, not the flag ``--beam`` of ``adlnmt translate``."""
    with make_client(max_beam=1000) as client:
        reply = client.post("/translate", json={"text": ["ein Hund"], "beam": 151})
    assert (reply.status_code, reply.json()["error"]) == (422, "invalid request: beam 151: wider than the target "
                                                          "vocabulary (150 pieces); a beam of at most 150 hypotheses "
                                                          "can tell them apart")  # fmt: skip


def test_cut_long_cuts_by_characters_not_bytes() -> None:
    assert cut_long(["äöü", "äöüß!"], 4) == (["äöü", "äöüß"], [None, "input line 2: 5 characters cut to 4 (the "
                                                                   "server's limit)"])  # fmt: skip


def test_warnings_are_numbered_by_each_requests_own_lines(
    make_client: ClientFactory, translator: Translator, test_lines: list[str], capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Two requests searched in one batch when they arrive together: each gets the warnings of its own lines, under
    its own line numbers; the search prints none (it once printed them numbered within the merged batch)."""
    too_many_pieces = " ".join(["a"] * (translator.max_input_len + 5))  # within max_chars
    bodies = [{"text": [too_many_pieces, test_lines[0]]}, {"text": [test_lines[1], test_lines[2], too_many_pieces]}]
    start = threading.Barrier(2)

    def post(client: TestClient, body: dict) -> dict:
        start.wait()
        return client.post("/translate", json=body).json()

    with caplog.at_level(logging.WARNING, logger="adlnmt.serve"), make_client(max_wait_ms=500) as client:
        capfd.readouterr()
        with ThreadPoolExecutor(2) as pool:
            first, second = pool.map(partial(post, client), bodies)
    expected = translator.input_warning(translator.encode_line(too_many_pieces), 1)
    assert expected is not None and first["warnings"] == [expected]
    assert second["warnings"] == [expected.replace("input line 1:", "input line 3:")]
    assert "truncated" not in capfd.readouterr().err
    assert sum(expected.split(":")[1] in record.getMessage() for record in caplog.records) == 2  # one per request


def test_each_line_is_encoded_once(
    make_client: ClientFactory, translator: Translator, test_lines: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cost check, the warnings, the search and the alignment's source pieces share one encoding per line."""
    vocab, encoded = translator.data.src_vocab, []
    with make_client() as client:
        monkeypatch.setattr(vocab, "encode", lambda text, encode=vocab.encode: encoded.append(text) or encode(text))
        reply = client.post("/translate", json={"text": [*test_lines[:3], ""], "alignments": True})
    assert reply.status_code == 200
    assert encoded == test_lines[:3]
    expected = [[vocab.piece(i) for i in translator.encode_line(line).ids] for line in test_lines[:3]]
    assert [t["source_pieces"] for t in reply.json()["translations"][:3]] == expected
