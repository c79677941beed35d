"""``POST /translate`` with lexical constraints gives what ``adlnmt translate --constraints`` gives; bad constraints
are 422, costly ones 413."""

from __future__ import annotations

import json
from pathlib import Path

from adlnmt.cli import main
from adlnmt.inference.constraints import MAX_PHRASES, occurrences, unmet
from adlnmt.inference.translator import Translator
from serve.server import ClientFactory


def test_constraints_equal_the_cli(
    make_client: ClientFactory, serve_model: Path, translator: Translator, test_lines: list[str], tmp_path: Path
) -> None:
    vocab, lines = translator.data.tgt_vocab, test_lines[:4]
    constraints = [{"include": ["Lo kane"]}, None, {"include": ["un", "femas"], "exclude": ["Le"]}, {}]
    source, wanted, output = tmp_path / "in.txt", tmp_path / "c.jsonl", tmp_path / "out.txt"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    wanted.write_text("".join(json.dumps(c or {}) + "\n" for c in constraints), encoding="utf-8")
    argv = ["translate", "--model", str(serve_model), "--input", str(source), "--constraints", str(wanted),
            "--beam", "4", "--output", str(output)]  # fmt: skip
    assert main(argv) == 0
    expected = output.read_text(encoding="utf-8").splitlines()
    with make_client() as client:
        reply = client.post("/translate", json={"text": lines, "beam": 4, "constraints": constraints})
        assert reply.status_code == 200, reply.text
        assert [t["translation"] for t in reply.json()["translations"]] == expected
        pieces = [vocab.ids(t["pieces"]) for t in reply.json()["translations"]]
        assert not unmet(pieces[0], [vocab.encode("Lo kane")])
        assert occurrences(pieces[2], vocab.encode("Le")) == 0


def test_bad_constraints_are_422_and_costly_ones_413(make_client: ClientFactory, test_lines: list[str]) -> None:
    lines = test_lines[:2]
    bad = {
        "1 constraints for 2 sentences": [{"include": ["Lo"]}],
        "is both in 'include' and in 'exclude'": [{"include": ["Lo"], "exclude": ["Lo"]}, None],
        "'include' phrase 1 is empty": [{"include": [" "]}, None],
        f"1,000 constraint phrases on one line; at most {MAX_PHRASES}": [{"exclude": ["Lo"] * 1000}, None],
        "Extra inputs are not permitted": [{"includes": ["Lo"]}, None],
        "Input should be a valid string": [{"include": [3]}, None],
    }
    with make_client(max_request_cost=400) as client:
        for message, constraints in bad.items():
            reply = client.post("/translate", json={"text": lines, "constraints": constraints})
            assert reply.status_code == 422 and message in reply.text, (message, reply.text)
        plain = client.post("/translate", json={"text": lines[:1], "beam": 4})
        assert plain.status_code == 200
        costly = {"text": lines[:1], "beam": 4, "constraints": [{"include": ["Lo kane femas un"] * MAX_PHRASES}]}
        reply = client.post("/translate", json=costly)
        assert reply.status_code == 413 and "pieces (sources, prefixes and constraints)" in reply.text


def test_an_unmeetable_include_phrase_is_a_warning(
    make_client: ClientFactory, translator: Translator, test_lines: list[str]
) -> None:
    vocab = translator.data.tgt_vocab
    with make_client() as client:
        request = {
            "text": test_lines[:2],
            "beam": 3,
            "constraints": [None, {"include": ["Lo kane"], "exclude": ["kane"]}],
        }
        reply = client.post("/translate", json=request)
        assert reply.status_code == 200, reply.text
        assert any(
            w.startswith("input line 2: include phrase 'Lo kane' cannot be met (it holds the exclude phrase 'kane')")
            for w in reply.json()["warnings"]
        )
        assert occurrences(vocab.ids(reply.json()["translations"][1]["pieces"]), vocab.encode("kane")) == 0


def test_include_phrases_of_an_empty_sentence_are_a_warning(make_client: ClientFactory, test_lines: list[str]) -> None:
    """An empty sentence gets an empty translation: its include phrases are not used, and ``warnings`` says so."""
    with make_client() as client:
        request = {"text": [test_lines[0], ""], "beam": 2, "constraints": [None, {"include": ["Lo kane"]}]}
        reply = client.post("/translate", json=request)
        assert reply.status_code == 200, reply.text
        assert reply.json()["translations"][1]["translation"] == ""
        assert reply.json()["warnings"] == [
            "input line 2: include phrase(s) 'Lo kane' not used, as the line is empty (an empty line gets an empty "
            "translation)"
        ]
