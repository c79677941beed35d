"""``POST /translate`` with target prefixes gives what ``adlnmt translate --prefix`` gives."""

from __future__ import annotations

from pathlib import Path

from adlnmt.cli import main
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
