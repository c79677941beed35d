"""The verdict table of the documentation's Reproductions page: the judged claims of every archived grid
(``claims.json`` next to each ``claims.md``) in one Markdown table, kept between two marker lines of the page so that
it is rebuilt from the committed results, never typed in (``adlnmt verdicts --page docs/reproductions.md``)."""

from __future__ import annotations

import os
from pathlib import Path

from adlnmt.errors import UserError
from adlnmt.experiment.runner import read_json

START = (
    "<!-- verdicts: built by `adlnmt verdicts --page docs/reproductions.md` from experiments/results/*/claims.json -->"
)
END = "<!-- /verdicts -->"
QUOTE_CHARS = 110  # longer quotes are shortened here; claims.md has them whole


def _short(quote: str) -> str:
    return quote if len(quote) <= QUOTE_CHARS else quote[: QUOTE_CHARS - 1].rstrip() + "…"


def verdict_table(archives: list[Path], base: Path) -> str:
    """One line per claim of every archive (a directory holding claims.json), links relative to ``base``; a line
    saying so when there is no archive yet."""
    if not archives:
        return "No grid has committed runs yet (`experiments/results/*/claims.json`)."
    lines = [
        "| table | claim | tested as | test set (seeds) | effect [interval] | p (Holm) | verdict | other test sets |",
        "|---|---|---|---|---:|---:|---|---|",
    ]
    for archive in archives:
        judged = read_json(archive / "claims.json")
        if not isinstance(judged, dict) or not isinstance(judged.get("claims"), list):
            raise UserError(f"{archive / 'claims.json'}: missing or malformed (rebuild it with adlnmt experiment "
                            "GRID --report-only)")  # fmt: skip
        link = Path(os.path.relpath(archive / "claims.md", base)).as_posix()
        title = judged["grid"] + (f" ({judged['scale']})" if judged.get("scale") else "")
        for claim in judged["claims"]:
            others = "; ".join(f"{o['test']} ({o['seed_list']}): {o['verdict']}" for o in claim["other_tests"]) or "–"
            against = " against" if claim.get("p_against_claim") else ""  # a key since 2026-11-26
            p_holm = "–" if claim["p_holm"] is None else f"{claim['p_holm']:.3f}{against}"
            verdict = f"**{claim['verdict']}**" + (f" (measured: {claim['measured']})"
                                                   if claim["measured"] != claim["verdict"] else "")  # fmt: skip
            lines.append(f"| [{title}]({link}) | “{_short(claim['quote'])}” | {claim['tested_as']} | "
                         f"{claim['test']} ({claim['seed_list']}) | {claim['summary']} | {p_holm} | "
                         f"{verdict} | {others} |")  # fmt: skip
    return "\n".join(lines)


def replace_block(text: str, table: str, where: Path) -> str:
    """``text`` with the lines between the START and END markers replaced by ``table``."""
    lines = text.split("\n")
    try:
        start, end = lines.index(START), lines.index(END)
    except ValueError:
        raise UserError(f"{where}: no verdict table markers; put the lines\n  {START}\n  {END}\n"
                        "where the table belongs") from None  # fmt: skip
    if end < start:
        raise UserError(f"{where}:{end + 1}: the end marker comes before the start marker (line {start + 1})")
    return "\n".join([*lines[: start + 1], table, *lines[end:]])


def default_archives(root: Path) -> list[Path]:
    """Every archive under ``root`` with judged claims, in name order."""
    return sorted(path.parent for path in root.glob("*/claims.json"))
