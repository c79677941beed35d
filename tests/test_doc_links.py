"""Every relative link in the repository's Markdown points at a file or folder that exists (the docs link results
that only exist once a grid has committed runs), and at a heading of a Markdown file where it names one; the
documentation site builds strictly (MkDocs: broken links and API references fail); the README stays short and
reaches every page of the site."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#([^)\s]*))?\)")  # [text](target#anchor)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
    reason="pip install 'adlnmt[docs]' (in the test extra)",
)
SKIPPED = {".venv", "node_modules", ".git", "runs"}  # installed packages and uncommitted grid output


def markdown_files() -> list[Path]:
    return sorted(path for path in ROOT.rglob("*.md") if not SKIPPED.intersection(path.relative_to(ROOT).parts[:-1]))


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings as GitHub (and MkDocs' toc) spell them: lower case, punctuation
    dropped, spaces as hyphens."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    headings = re.findall(r"^#{1,6} (.+?)\s*$", text, re.MULTILINE)
    return {re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", heading.lower())) for heading in headings}


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in LINK.finditer(text):
        target, anchor = match.groups()
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, mailto: …
            continue
        line = text.count("\n", 0, match.start()) + 1
        linked = path.parent / target
        if not linked.exists():
            found.append(f"{path.relative_to(root)}:{line}: {target}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            found.append(f"{path.relative_to(root)}:{line}: {target}#{anchor} (no such heading)")
    return found


def test_the_markdown_files_are_found() -> None:
    assert ROOT / "README.md" in markdown_files()


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_the_pages_the_code_names_exist() -> None:
    """A page named in a help text or message (``docs/contrastive.md``) exists: ``contrastive --help`` once
    pointed to a page that did not."""
    named = {
        f"{path.relative_to(ROOT)}: {page}"
        for path in (ROOT / "src").rglob("*.py")
        for page in re.findall(r"docs/[\w-]+\.md", path.read_text(encoding="utf-8"))
        if not (ROOT / page).is_file()
    }
    assert named == set()


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("x")
    doc = tmp_path / "doc.md"
    (tmp_path / "there.md").write_text("# Top\n\n## Data: `adlnmt prepare`\n\n```\n# not a heading\n```\n")
    doc.write_text("[ok](there.md#top) [web](https://example.org/a)\n[gone](results/claims.md)\n"
                   "[ok](there.md#data-adlnmt-prepare) [no](there.md#not-a-heading)\n")  # fmt: skip
    assert broken_links(doc, tmp_path) == ["doc.md:2: results/claims.md",
                                           "doc.md:3: there.md#not-a-heading (no such heading)"]  # fmt: skip


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "--config-file",
        str(config),
        "--site-dir",
        str(site),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@needs_mkdocs
def test_the_documentation_site_builds_strictly(tmp_path: Path) -> None:
    """`make docs`: every page, link and API reference resolves (a warning fails a strict build)."""
    built = mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8").count("Translator") > 3
    # The result reports that Reproductions links (outside docs/) are part of the site (docs/hooks.py).
    assert (tmp_path / "site" / "repository" / "experiments" / "results" / "adl-table5-cpu" / "claims").is_dir()


@needs_mkdocs
def test_a_broken_link_out_of_docs_fails_the_build(tmp_path: Path) -> None:
    """docs/hooks.py adds the repository files the pages link (``../X``) to the site; a missing one fails."""
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "hooks.py", tmp_path / "docs" / "hooks.py")
    (tmp_path / "notes.md").write_text("# Notes\n\n[figure](figure.png)\n")
    (tmp_path / "figure.png").write_bytes(b"\x89PNG")
    config = {"site_name": "t", "hooks": ["docs/hooks.py"], "exclude_docs": "hooks.py\n"}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[notes](../notes.md)\n")
    assert mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site").returncode == 0
    assert (tmp_path / "site" / "repository" / "figure.png").is_file()  # linked from the linked notes
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[notes](../notes.md) [gone](../gone.md)\n")
    built = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 1 and "links '../gone.md', which is not in the repository" in built.stderr


def test_the_readme_is_short_and_reaches_every_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 150
    assert readme.startswith("```\nmake demo ") and "make test " in readme.split("\n# ", 1)[0]
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = [page for entry in config["nav"] for page in entry.values()]
    assert {f"docs/{page}" for page in pages if page != "index.md"} <= {target for target, _ in LINK.findall(readme)}
    assert sorted(pages) == sorted(path.name for path in (ROOT / "docs").glob("*.md"))  # every page in the nav
