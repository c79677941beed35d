"""The tables of the documentation's Reproductions page, rebuilt from the committed results, never typed in
(``adlnmt verdicts --page docs/reproductions.md``): the judged claims of every archived grid (``claims.json`` next to
each ``claims.md``) in one Markdown table, and, where the page asks for it, how many of each grid's planned runs have
finished (``results.csv``). Each is kept between two marker lines of the page."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from adlnmt.errors import UserError
from adlnmt.jsontext import read_object
from adlnmt.verdicts.statistics import ONE_SEED

START = (
    "<!-- verdicts: built by `adlnmt verdicts --page docs/reproductions.md` from experiments/results/*/claims.json -->"
)
END = "<!-- /verdicts -->"
PROGRESS_START = (
    "<!-- progress: built by `adlnmt verdicts --page docs/reproductions.md` from experiments/results/*/results.csv -->"
)
PROGRESS_END = "<!-- /progress -->"
QUOTE_CHARS = 110  # longer quotes are shortened here; claims.md has them whole


def _short(quote: str) -> str:
    return quote if len(quote) <= QUOTE_CHARS else quote[: QUOTE_CHARS - 1].rstrip() + "…"


HEADER = (
    "| table | claim | hypothesis (H1) | test set (seeds) | effect [interval] | p ± MC error | Holm (family) | MDE "
    "| registered | verdict | other test sets |"
)


def _cells(claim: dict, title: str, link: str) -> str:
    """One claim's line of the verdict table."""
    others = "; ".join(f"{o['test']} ({o['seed_list']}): {o['verdict']}" for o in claim["other_tests"]) or "–"
    against = " against" if claim.get("p_against_claim") else ""
    p = "–" if claim["p"] is None else f"{claim['p']:.4f} ± {claim.get('p_mc_error') or 0:.4f}{against}"
    if claim.get("p_against_claim_bonferroni") is not None:  # the p a *does not hold* of a one-sided claim rests on
        p += f"; against the claim {claim['p_against_claim_bonferroni']:.4f} (Bonferroni)"
    if claim.get("resamples"):
        p += f" ({claim['resamples']:,} replicates{'; MC error could still flip it' if claim.get('unsettled') else ''})"
    holm = "–" if claim["p_holm"] is None else f"{claim['p_holm']:.3f} (of {claim.get('family_size', '?')})"
    verdict = f"**{claim['verdict']}**"
    if claim.get("out_of_scope"):
        verdict += f" ({claim['out_of_scope']}; measured: {claim['measured']})"
    elif claim["measured"] != claim["verdict"]:
        also = f"also {ONE_SEED}; " if claim.get("also_one_seed") else ""  # beside not converged
        verdict += f" ({also}measured: {claim['measured']})"
    if claim.get("untimed"):
        verdict += f" (no timing: {'; '.join(claim['untimed'])})"
    if claim.get("post_registration") and claim["post_registration"] != claim["verdict"]:
        verdict += f"; on the runs after its registration alone: {claim['post_registration']}"
    registered, mde = claim.get("registration") or "not recorded", claim.get("mde_text", "–")
    return (f"| [{title}]({link}) | “{_short(claim['quote'])}” | H1: {claim['tested_as']} | "
            f"{claim['test']} ({claim['seed_list']}) | {claim['summary']} | {p} | {holm} | {mde} "
            f"| {registered} | {verdict} | {others} |")  # fmt: skip


def verdict_table(archives: list[Path], base: Path) -> str:
    """The verdicts of every archive (a directory holding claims.json), links relative to ``base``: the error rate
    of each claim kind, the claims registered before any result of their rows, then, as exploratory, those
    registered after some (post hoc), then each table's rank agreement with the paper; a line saying so when there
    is no archive yet."""
    if not archives:
        return "No grid has committed runs yet (`experiments/results/*/claims.json`)."
    confirmatory, exploratory, ranks, rates = [], [], [], {}
    for archive in archives:
        judged = _judged(archive)
        link = Path(os.path.relpath(archive / "claims.md", base)).as_posix()
        title = _title(judged)
        rates.update(judged.get("error_rates", {}))
        for i, claim in enumerate(judged["claims"]):
            with _entry(archive, f"claims[{i}]"):
                line = _cells(claim, title, link)
            (confirmatory if claim.get("registered_before_results") else exploratory).append(line)
        for i, found in enumerate(judged.get("rank_agreement", [])):
            with _entry(archive, f"rank_agreement[{i}]"):
                interval = found["interval"]
                rho = f"{found['rho']:+.2f} " + (
                    f"[{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else "(no interval: a row has one seed)"
                )
                ranks.append(f"| [{title}]({link}) | {found['column']} | {found['metric']} {found['test']} | "
                             f"{found['rows']} ({found['seeds']} runs) | {rho} |")  # fmt: skip
    rule = "|---|---|---|---|---:|---:|---:|---|---|---|---|"
    lines = [
        "Error rates, one per claim kind (the test's direction fixed by the paper's wording): "
        + "; ".join(f"*{kind.replace('_', ' ')}*: {rate}" for kind, rate in rates.items())
        + ". Holm's family: the claims of a table registered together (one commit), fixed at registration. "
        "p ± its Monte Carlo error; MDE: the minimum detectable effect at 80 % power and the kind's α.",
        "",
        "**Registered before the results** (every run these claims read was evaluated after the claim took its form):",
        "",
        HEADER,
        rule,
        *(confirmatory or ["| – | none | | | | | | | | | |"]),
        "",
        "**Exploratory: registered after results** (the claim took its form after some of its runs had results; the "
        "verdict on the later runs alone is given where it differs):",
        "",
        HEADER,
        rule,
        *(exploratory or ["| – | none | | | | | | | | | |"]),
    ]
    if ranks:
        lines += [
            "",
            "**Rank agreement with the paper** (Spearman's ρ between the paper's column and the rows' mean scores "
            "here, 95 % bootstrap interval over seeds, none while a row has one seed):",
            "",
            "| table | paper's column | ours | rows (runs) | ρ [interval] |",
            "|---|---|---|---|---:|",
            *ranks,
        ]
    return "\n".join(lines)


@contextmanager
def _entry(archive: Path, where: str) -> Iterator[None]:
    """Reading one entry of ``archive``'s claims.json: a missing key or a wrong type (a hand-edited or truncated
    file) is an error naming the file and the entry, not a traceback."""
    try:
        yield
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as err:
        raise UserError(f"{archive / 'claims.json'}: {where}: malformed ({type(err).__name__}: {err}); rebuild it "
                        "with adlnmt experiment GRID --report-only") from None  # fmt: skip


def _judged(archive: Path) -> dict:
    """The archive's claims.json, checked."""
    if not archive.is_dir():
        raise UserError(f"{archive}: not a folder (a grid's archive, such as experiments/results/NAME-SCALE)")
    judged = read_object(archive / "claims.json")
    if judged is None or not isinstance(judged.get("claims"), list) or not isinstance(judged.get("grid"), str):
        raise UserError(f"{archive / 'claims.json'}: missing or malformed (rebuild it with adlnmt experiment "
                        "GRID --report-only)")  # fmt: skip
    return judged


def _title(judged: dict) -> str:
    return judged["grid"] + (f" ({judged['scale']})" if judged.get("scale") else "")


def progress_table(archives: list[Path], base: Path) -> str:
    """Per archive, its finished runs of those planned (rows shared with another grid count where they finished)
    and the rows still short of their planned seeds, from the archive's ``results.csv``; links relative to ``base``."""
    if not archives:
        return "No grid has committed runs yet (`experiments/results/*/results.csv`)."
    lines = ["| table | runs finished | rows short of their planned seeds (finished / planned) |", "|---|---:|---|"]
    for archive in archives:
        path = archive / "results.csv"
        try:
            with path.open(encoding="utf-8", newline="") as handle:
                rows = [(r["variant"], int(r["seeds_finished"]), int(r["seeds_total"])) for r in csv.DictReader(handle)]
        except (OSError, KeyError, TypeError, ValueError):
            raise UserError(f"{path}: missing or malformed (rebuild it with adlnmt experiment GRID "
                            "--report-only)") from None  # fmt: skip
        title = _title(_judged(archive))
        link = Path(os.path.relpath(path.with_name("results.md"), base)).as_posix()
        short = ", ".join(f"{name} {done} / {planned}" for name, done, planned in rows if done < planned) or "none"
        done, planned = sum(r[1] for r in rows), sum(r[2] for r in rows)
        lines.append(f"| [{title}]({link}) | {done} of {planned} | {short} |")
    return "\n".join(lines)


def replace_block(text: str, table: str, where: Path, start_marker: str = START, end_marker: str = END) -> str:
    """``text`` with the lines between the two marker lines replaced by ``table``."""
    lines = text.split("\n")
    try:
        start, end = lines.index(start_marker), lines.index(end_marker)
    except ValueError:
        raise UserError(f"{where}: no table markers; put the lines\n  {start_marker}\n  {end_marker}\n"
                        "where the table belongs") from None  # fmt: skip
    if end < start:
        raise UserError(f"{where}:{end + 1}: the end marker comes before the start marker (line {start + 1})")
    return "\n".join([*lines[: start + 1], table, *lines[end:]])


def rebuild_page(text: str, archives: list[Path], page: Path) -> str:
    """The page's text with its verdict table (required) and its progress table (where it has the markers)
    rebuilt; links relative to the page's folder."""
    text = replace_block(text, verdict_table(archives, page.parent), page)
    if PROGRESS_START in text.split("\n"):
        text = replace_block(text, progress_table(archives, page.parent), page, PROGRESS_START, PROGRESS_END)
    return text


def default_archives(root: Path) -> list[Path]:
    """Every archive under ``root`` with judged claims, in name order."""
    return sorted(path.parent for path in root.glob("*/claims.json"))
