"""``POST /translate`` with target prefixes gives what ``adlnmt translate --prefix`` gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.inference.translator import Translator
from serve.server import ClientFactory


def test_prefixes_equal_the_cli(
    make_client: ClientFactory, serve_model: Path, test_lines: list[str], tmp_path: Path
) -> None:
    lines, prefixes = test_lines[:4], ["Lo kane", "", "Le femas", "Un"]
    source, prefix, output = tmp_path / "in.txt", tmp_path / "prefix.txt", tmp_path / "out.txt"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    prefix.write_text("".join(line + "\n" for line in prefixes), encoding="utf-8")
    argv = ["translate", "--model", str(serve_model), "--input", str(source), "--prefix", str(prefix),
            "--beam", "3", "--output", str(output)]  # fmt: skip
    assert main(argv) == 0
    expected = output.read_text(encoding="utf-8").splitlines()
    with make_client() as client:
        reply = client.post("/translate", json={"text": lines, "beam": 3, "prefix": prefixes})
        assert reply.status_code == 200, reply.text
        assert [t["translation"] for t in reply.json()["translations"]] == expected
        assert all(text.startswith(start) for text, start in zip(expected, prefixes, strict=True))
        refused = client.post("/translate", json={"text": lines, "prefix": ["Lo"]})
        assert refused.status_code == 422 and "1 prefixes for 4 sentences" in refused.text


def test_a_long_prefix_is_cut_to_max_chars_and_counted_in_the_cost(make_client: ClientFactory) -> None:
    """One request's long prefix cannot hold the search: it is cut like a sentence, and its pieces count in the
    request's cost (the search forces every one of them)."""
    prefix = "Lo kane " * 20
    with make_client(max_chars=31) as client:
        reply = client.post("/translate", json={"text": ["ein Hund ."], "beam": 2, "prefix": [prefix]})
    assert reply.status_code == 200, reply.text
    translation = reply.json()["translations"][0]["translation"]
    assert translation.startswith(prefix[:31]) and not translation.startswith(prefix[:40])
    assert "prefix of line 1: 160 characters cut to 31 (the server's limit)" in reply.json()["warnings"]
    with make_client(max_request_cost=60) as client:
        plain = client.post("/translate", json={"text": ["ein Hund ."], "beam": 2, "prefix": [""]})
        costly = client.post("/translate", json={"text": ["ein Hund ."], "beam": 2, "prefix": [prefix]})
    assert plain.status_code == 200, plain.text
    assert costly.status_code == 413 and "pieces (sources, prefixes and constraints)" in costly.json()["error"]


def test_prefix_edge_cases_are_warned_per_line(make_client: ClientFactory, translator: Translator) -> None:
    """Characters outside the target vocabulary come back as ⁇, a prefix as long as the output limit is the whole
    translation, a prefix on an empty line is not used: each said in the response (docs/serving.md)."""
    long_prefix = "Lo kane " * 10
    assert len(translator.data.tgt_vocab.encode(long_prefix)) >= 2 * 5 + 10  # "ein Hund ." is under 5 pieces
    body = {"text": ["ein Hund .", "ein Hund .", "", "ein Hund ."], "beam": 2,
            "prefix": ["Lo ж kane", long_prefix, "Lo", "Lo kane"]}  # fmt: skip
    with make_client() as client:
        reply = client.post("/translate", json=body)
    assert reply.status_code == 200, reply.text
    found = reply.json()
    assert "⁇" in found["translations"][0]["translation"]
    assert found["translations"][1]["translation"] == translator.data.tgt_vocab.decode(
        translator.data.tgt_vocab.encode(long_prefix)
    )
    assert found["translations"][2]["translation"] == ""
    assert found["warnings"] == [
        "prefix of line 1: characters outside the target vocabulary, which the translation spells ⁇ (ж)",
        "prefix of line 2: as long as the output limit of its source or longer, so the translation is the prefix "
        f"alone ({len(translator.data.tgt_vocab.encode(long_prefix))} pieces; the limit is "
        f"{2 * len(translator.encode_line('ein Hund .').ids) + 10})",
        "prefix of line 3: not used, as its source line is empty (an empty line gets an empty translation)",
    ]


def test_translate_warns_of_prefix_edge_cases_once_per_file(
    serve_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, prefix = tmp_path / "in.txt", tmp_path / "prefix.txt"
    source.write_text("ein Hund .\n\nein Hund .\n\nein Hund .\n", encoding="utf-8")
    prefix.write_text("Lo ж\nLo\nLo ж kane\nLe\nLo\n", encoding="utf-8")
    argv = ["translate", "--model", str(serve_model), "--input", str(source), "--prefix", str(prefix),
            "--beam", "2", "--output", str(tmp_path / "out.txt")]  # fmt: skip
    assert main(argv) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {prefix}: 2 prefix(es), line(s) 1, 3: characters outside the target vocabulary, which the "
        "translation spells ⁇",
        f"warning: {prefix}: 2 prefix(es), line(s) 2, 4: not used, as its source line is empty (an empty line gets "
        "an empty translation)",
    ]
