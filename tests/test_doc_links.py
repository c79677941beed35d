"""Every relative link in the repository's Markdown points at a file or folder that exists (the README links results
that only exist once a grid has committed runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")  # [text](target#anchor)
SKIPPED = {".venv", "node_modules", ".git", "runs"}  # installed packages and uncommitted grid output


def markdown_files() -> list[Path]:
    return sorted(path for path in ROOT.rglob("*.md") if not SKIPPED.intersection(path.relative_to(ROOT).parts[:-1]))


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in LINK.finditer(text):
        target = match.group(1)
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, mailto: …
            continue
        if not (path.parent / target).exists():
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(root)}:{line}: {target}")
    return found


def test_the_markdown_files_are_found() -> None:
    assert ROOT / "README.md" in markdown_files()


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("x")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](there.md#top) [web](https://example.org/a)\n[gone](results/claims.md)\n")
    assert broken_links(doc, tmp_path) == ["doc.md:2: results/claims.md"]
