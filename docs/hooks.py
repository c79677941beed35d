"""MkDocs hook: the pages link repository files outside ``docs/`` (result reports, benchmark notes) as on GitHub,
``../experiments/results/...``. Such targets, and what they link in turn, join the site under ``repository/``
and the links are rewritten to them, so that MkDocs' strict link check covers them too (a missing target is
not added, and its link fails the build)."""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

LINK = re.compile(r"(\]\()([^)#\s]+)((?:#[^)\s]*)?\))")  # [text](target#anchor)
PREFIX = "repository/"
log = logging.getLogger("mkdocs.hooks.repository_links")  # under "mkdocs": a warning fails a strict build


def _repository(config) -> Path:
    return Path(config["docs_dir"]).resolve().parent


def _relative_targets(text: str) -> list[str]:
    return [m.group(2) for m in LINK.finditer(text) if not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", m.group(2))]


def on_files(files: Files, config) -> Files:
    """Add every repository file that a page links outside docs/ (and, from Markdown, what those link)."""
    root, docs = _repository(config), Path(config["docs_dir"]).resolve()
    pending = [Path(f.abs_src_path) for f in files.documentation_pages()]
    seen: set[Path] = set()
    while pending:
        page = pending.pop()
        for target in _relative_targets(page.read_text(encoding="utf-8")):
            path = (page.parent / target).resolve()
            if path in seen or not path.is_file() or docs in path.parents or root not in path.parents:
                continue
            seen.add(path)
            files.append(File.generated(config, PREFIX + path.relative_to(root).as_posix(), abs_src_path=str(path)))
            if path.suffix == ".md":
                pending.append(path)
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """In a page of docs/, ``../X`` (a repository file) becomes ``repository/X`` relative to the page."""
    if page.file.src_uri.startswith(PREFIX):
        return markdown
    depth = page.file.src_uri.count("/")

    def rewrite(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page.file.src_uri), match.group(2)))
        if not target.startswith("../"):
            return match.group(0)
        if not (_repository(config) / target[3:]).exists():
            log.warning(f"Doc file '{page.file.src_uri}' links '{match.group(2)}', which is not in the repository")
        return match.group(1) + "../" * depth + PREFIX + target[3:] + match.group(3)

    return LINK.sub(rewrite, markdown)
