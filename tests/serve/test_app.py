"""``POST /translate`` gives what ``adlnmt translate`` gives; ``/health``, ``/model``, the page and the API page."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.inference.translator import Translator
from serve.server import ClientFactory


def cli_translate(model: Path, lines: list[str], tmp_path: Path, *flags: str) -> str:
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert main(["translate", "--model", str(model), "--input", str(source), "--output", str(output), *flags]) == 0
    return output.read_text(encoding="utf-8")


def test_translations_equal_the_cli(
    make_client: ClientFactory, serve_model: Path, test_lines: list[str], tmp_path: Path
) -> None:
    lines = [*test_lines[:6], "", test_lines[6]]  # an empty line gets an empty translation, as in the CLI
    expected = cli_translate(serve_model, lines, tmp_path, "--beam", "5").splitlines()
    with make_client() as client:
        reply = client.post("/translate", json={"text": lines, "beam": 5})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert [t["translation"] for t in body["translations"]] == expected
    assert [t["source"] for t in body["translations"]] == lines
    assert body["warnings"] == []
    empty = body["translations"][6]
    assert empty["nbest"] == [] and empty["score"] is None and empty["pieces"] == []


def test_nbest_and_alignments_equal_the_cli_json(
    make_client: ClientFactory, serve_model: Path, test_lines: list[str], tmp_path: Path
) -> None:
    lines = test_lines[:4]
    records = cli_translate(serve_model, lines, tmp_path, "--beam", "4", "--nbest", "3", "--alignments")
    cli = [json.loads(line) for line in records.splitlines()]
    expected = [[{k: v for k, v in hyp.items() if k != "hard_alignment"} for hyp in r["hypotheses"]] for r in cli]
    with make_client() as client:
        reply = client.post("/translate", json={"text": lines, "beam": 4, "nbest": 3, "alignments": True})
    assert reply.status_code == 200, reply.text
    translations = reply.json()["translations"]
    assert [t["nbest"] for t in translations] == expected  # the CLI adds hard alignments
    assert [t["source_pieces"] for t in translations] == [r["source_pieces"] for r in cli]
    for result in translations:
        best = result["nbest"][0]
        assert len(result["nbest"]) == 3
        assert (result["translation"], result["score"], result["alignment"]) == (
            best["translation"], best["score"], best["alignment"])  # fmt: skip
        assert result["source_pieces"][-1] == "</s>"
        assert len(result["alignment"]) == len(result["pieces"]) + 1
        assert all(len(row) == len(result["source_pieces"]) for row in result["alignment"])


def test_no_alignment_fields_unless_asked(make_client: ClientFactory, test_lines: list[str]) -> None:
    with make_client() as client:
        result = client.post("/translate", json={"text": test_lines[:1]}).json()["translations"][0]
    assert "alignment" not in result and "source_pieces" not in result and "alignment" not in result["nbest"][0]


def test_health_counts_batches_and_lists_limits(make_client: ClientFactory, test_lines: list[str]) -> None:
    with make_client(max_sentences=7) as client:
        before = client.get("/health").json()
        client.post("/translate", json={"text": test_lines[:3], "beam": 2})
        after = client.get("/health").json()
    assert before["status"] == "ok" and before["batching"]["batches"] == 0
    assert after["batching"] == {
        "batches": 1, "sentences": 3, "requests": 1, "queued_sentences": 0, "searching_sentences": 0,
        "largest_batch": 3}  # fmt: skip
    assert after["limits"]["max_sentences"] == 7


def test_model_describes_adl_sizes_training_and_diagram(make_client: ClientFactory, serve_model: Path) -> None:
    with make_client() as client:
        info = client.get("/model").json()
    stored = json.loads((serve_model / "config.json").read_text())["model"]
    assert info["encoder"].startswith("pos -> repeat(2, ") and info["decoder"].endswith("-> norm")
    assert stored["encoder"].replace(" ", "") in info["encoder"].replace(" ", "")
    assert info["parameters"] > 10_000
    assert info["src_vocab"] == info["tgt_vocab"] == 150
    assert info["training"]["updates"] == 40 and info["training"]["checkpoints"] == 1 and info["alignments"] is True
    assert info["training"]["best_valid_ppl_update"] == 40 and info["training"]["best_valid_ppl"] > 1
    assert "best_valid_bleu" not in info["training"]  # trained with --no-valid-bleu
    if shutil.which("dot"):
        assert info["diagram_svg"].startswith("<svg") and info["diagram_error"] is None
    else:
        assert info["diagram_svg"] is None and "dot" in info["diagram_error"]


def test_page_docs_and_schema_are_served_offline(make_client: ClientFactory) -> None:
    with make_client() as client:
        page = client.get("/")
        docs = client.get("/docs")
        script = client.get("/static/app.js")
        schema = client.get("/openapi.json").json()
    assert page.status_code == 200 and 'id="translate"' in page.text and "/static/app.js" in page.text
    assert docs.status_code == 200 and "/static/docs.js" in docs.text
    for html in (page.text, docs.text, script.text):
        assert "https://" not in html and "http://" not in html  # nothing from a CDN
    assert script.status_code == 200 and 'fetch("/translate"' in script.text
    request = schema["paths"]["/translate"]["post"]
    assert request["requestBody"]["content"]["application/json"]["schema"]["required"] == ["text"]
    assert {"200", "400", "413", "422", "503", "504"} <= set(request["responses"])
    models = schema["components"]["schemas"]
    assert "this request's own lines" in models["TranslateResponse"]["properties"]["warnings"]["description"]
    assert "error_id" in models["ErrorResponse"]["properties"] and "500" in request["responses"]


@pytest.mark.parametrize("path", ["/nowhere", "/static/missing.js"])
def test_unknown_paths_are_json_404(make_client: ClientFactory, path: str) -> None:
    with make_client() as client:
        reply = client.get(path)
    assert reply.status_code == 404 and reply.json() == {"error": "Not Found"}


@pytest.fixture
def ct2_translator(serve_model: Path, tmp_path: Path) -> Translator:
    """The tiny model exported to CTranslate2, loaded: an engine without alignments, prefixes or constraints."""
    pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed")
    assert main(["export", "--model", str(serve_model), "--format", "ctranslate2", "--out", str(tmp_path / "ct2")]) == 0
    return Translator.load(tmp_path / "ct2", engine="ctranslate2")


def test_an_engine_without_alignments_says_so(
    make_client: ClientFactory, ct2_translator: Translator, test_lines: list[str]
) -> None:
    with make_client(ct2_translator) as client:
        info = client.get("/model").json()
        plain = client.post("/translate", json={"text": test_lines[:2], "beam": 1})
        aligned = client.post("/translate", json={"text": test_lines[:2], "alignments": True})
    assert (info["engine"], info["alignments"]) == ("ctranslate2", False)
    assert plain.status_code == 200 and len(plain.json()["translations"]) == 2
    assert (aligned.status_code, aligned.json()) == (
        422, {"error": "invalid request: the ctranslate2 engine gives no alignments"})  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"prefix": ["Lo"]}, "a target prefix needs the torch engine, not ctranslate2"),
        ({"constraints": [{"exclude": ["Lo"]}]}, "lexical constraints need the torch engine, not ctranslate2"),
    ],
)
def test_what_the_engine_lacks_fails_only_the_request_asking_it(
    make_client: ClientFactory, ct2_translator: Translator, test_lines: list[str], extra: dict, message: str
) -> None:
    """A prefix or constraints on an engine without them is refused before the request is queued, so a plain
    request batched with it (a batch of 2 sentences, or whatever arrived within 1 s) is still translated."""
    with make_client(ct2_translator, max_batch_sentences=2, max_wait_ms=1000) as client, ThreadPoolExecutor(2) as pool:
        plain = pool.submit(client.post, "/translate", json={"text": test_lines[:1]})
        asking = pool.submit(client.post, "/translate", json={"text": test_lines[1:2], **extra})
        plain_reply, asking_reply = plain.result(), asking.result()
    assert plain_reply.status_code == 200, plain_reply.text
    assert (asking_reply.status_code, asking_reply.json()) == (422, {"error": f"invalid request: {message}"})
