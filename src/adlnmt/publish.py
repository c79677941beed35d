"""``adlnmt publish MODEL --out DIR``: a folder ready for the Hugging Face Hub (nothing is uploaded); above export
and train (it may include the ONNX export and reads what training and grids wrote).

Contents: the weights as safetensors with their configs and tokenizer files (MarianMT's files when the architecture
maps onto MarianMT, :mod:`adlnmt.interop.hf_export`; otherwise adlnmt's ``model.safetensors``, ``config.json`` and
``vocab/``), ``diagram.png`` (the architecture, drawn by Graphviz), the ONNX export when asked, and ``README.md``: a
model card with YAML front matter, the ADL sentences, the diagram, the data digest and sizes, the training settings,
a summary of the validation curve, test scores and, for a run of an ``adlnmt experiment`` grid, the verdicts of the
claims about its variant. The folder is written beside ``--out`` and renamed into place when complete.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path
from typing import Any

from adlnmt.errors import UserError
from adlnmt.interop.staging import check_new_directory, write_new_directory
from adlnmt.store import ModelDir, names
from adlnmt.store.atomic import path_flag, read_json_object

RESULT = "result.json"  # beside a grid run's model directory (adlnmt experiment): its test scores
CLAIMS = "claims.json"  # in the grid's results folder: the claims and their verdicts
ONNX_DIR = "onnx"  # the ONNX export's folder in the published folder (--onnx)
WHAT = "publish"  # in messages about --out
MODEL_SETTINGS = ("d_model", "heads", "ff_factor", "dropout", "tie_source", "tie_output", "max_len")
TRAINING_SETTINGS = ("label_smoothing", "batch_tokens", "accumulate", "lr", "lr_schedule", "warmup", "max_updates",
                     "max_epochs", "patience", "seed", "precision", "init_from")  # fmt: skip


MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]|])")  # a backslash-escape keeps each literal (| splits table cells)
PLAIN_YAML = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")  # a scalar YAML reads back as the same string, in any context


def one_line(text: str) -> str:
    """``text`` with its line breaks, tabs and other whitespace but the space shown as escapes (``\\n``)."""
    return "".join(repr(c)[1:-1] if c.isspace() and c != " " else c for c in text)


def markdown_text(value: Any) -> str:
    """``value`` as literal Markdown text on one line: no HTML, emphasis, link, code or table cell of its own, and a
    line break (of a folder name, a test set's name) shown as ``\\n``, not starting a heading or front matter."""
    return one_line(MARKDOWN_SPECIAL.sub(r"\\\1", str(value)).replace("&", "&amp;").replace("<", "&lt;"))


def code_in_table(value: Any) -> str:
    """``value`` inside a code span of a table cell: its ``|`` escaped (GitHub ends the cell there otherwise)."""
    return one_line(str(value).replace("|", "\\|"))


def yaml_string(value: Any) -> str:
    """``value`` as a YAML scalar of the front matter: plain when it is a simple name, else double-quoted (JSON's
    string syntax, which YAML reads as the same string), so no name adds keys or ends the front matter."""
    text = str(value)
    return text if PLAIN_YAML.fullmatch(text) else json.dumps(text)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _refuse(where: str, wanted: str, value: Any) -> UserError:
    return UserError(f"{where}: must be {wanted}, got {json.dumps(value)}")


def checked_tests(result: dict[str, Any], path: Path) -> dict[str, dict[str, Any]]:
    """result.json's ``tests`` (test set → its ``scores`` and ``signatures`` by metric), checked: a UserError naming
    ``path`` and the entry where one is not what the card shows."""
    tests = result.get("tests", {})
    if not isinstance(tests, dict):
        raise _refuse(f"{path}: tests", "an object of test sets", tests)
    for test, entry in tests.items():
        if not isinstance(entry, dict):
            raise _refuse(f"{path}: tests.{test}", "an object (scores, signatures)", entry)
        for key in ("scores", "signatures"):
            if not isinstance(entry.get(key, {}), dict):
                raise _refuse(f"{path}: tests.{test}.{key}", "an object by metric", entry[key])
        for metric, value in entry.get("scores", {}).items():
            if not _is_number(value):
                raise _refuse(f"{path}: tests.{test}.scores.{metric}", "a number", value)
    return tests


def checked_claims(claims: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """claims.json's ``claims``, checked: a list of objects (a UserError naming ``path`` and the entry)."""
    entries = claims.get("claims", [])
    if not isinstance(entries, list):
        raise _refuse(f"{path}: claims", "a list of claims", entries)
    for index, claim in enumerate(entries):
        if not isinstance(claim, dict):
            raise _refuse(f"{path}: claims[{index}]", "an object (a claim)", claim)
    return entries


def grid_run(model_dir: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The grid run's result.json beside ``model_dir`` (None when it is not a grid run; its ``tests`` checked) and
    the claims about its variant from the grid's claims.json (searched up to four folders above)."""
    result_path = model_dir.parent / RESULT
    if not result_path.is_file():
        return None, []
    result = read_json_object(result_path)
    checked_tests(result, result_path)
    for folder in list(model_dir.parents)[1:5]:
        path = folder / CLAIMS
        if path.is_file():
            claims = read_json_object(path)
            if claims.get("grid") == result.get("experiment"):
                variant = result.get("variant")
                return result, [c for c in checked_claims(claims, path)
                                if variant in (c.get("first"), c.get("second"))]  # fmt: skip
    return result, []


def checked_records(files: ModelDir) -> list[dict[str, Any]]:
    """The validated checkpoints' records of ``metrics.jsonl``; a UserError naming it and the update where a score
    is not a number."""
    records = files.checkpoint_records()
    for record in records:
        for key in ("valid_ppl", "valid_bleu"):
            if record.get(key) is not None and not _is_number(record[key]):
                raise _refuse(f"{files.metrics_file}: the record of update {record['update']}: {key}", "a number",
                              record[key])  # fmt: skip
    return records


def validation_summary(records: list[dict[str, Any]], imported: bool = False) -> list[str]:
    """The first, best and last validated checkpoints; the best is the one training kept as best.safetensors (the
    last record's ``best_update``: with ``--early-stop-metric bleu`` not the one of least perplexity)."""
    if not records:
        why = "an imported model: its source's own evaluation applies" if imported else "metrics.jsonl holds none"
        return [f"No validated checkpoint ({why})."]
    metric = "valid_ppl"
    kept = [r for r in records if r.get("update") == records[-1].get("best_update")]
    best = kept[-1] if kept else min(records, key=lambda r: r.get(metric, float("inf")))
    lines = [f"{len(records)} validated checkpoints, updates {records[0]['update']} to {records[-1]['update']}.", "",
             "| checkpoint | update | valid ppl | valid BLEU |", "|---|---|---|---|"]  # fmt: skip
    for label, record in (("first", records[0]), ("best", best), ("last", records[-1])):
        bleu = record.get("valid_bleu")
        lines.append(f"| {label} | {record['update']} | {record.get(metric, float('nan')):.2f} | "
                     f"{'-' if bleu is None else f'{bleu:.2f}'} |")  # fmt: skip
    return lines


def base_model(path: Path) -> str:
    """The Hub id of an imported model's folder where the Hugging Face cache names it
    (``…/models--ORG--NAME/snapshots/COMMIT`` → ``ORG/NAME``, ``models--NAME`` → ``NAME``), else the folder's name."""
    repo = path.parent.parent.name
    if path.parent.name == "snapshots" and repo.startswith("models--") and len(repo) > len("models--"):
        return repo[len("models--") :].replace("--", "/", 1)
    return path.name


def card(model_dir: Path, stored: dict[str, Any], refusal: str | None, diagram: str | None, missing: str,
         onnx: bool = False) -> str:  # fmt: skip
    """README.md: the model card (``refusal``: why the architecture is not MarianMT's, None when it is;
    ``diagram``: the image's file name, or None and ``missing`` says why; ``onnx``: the folder holds the ONNX
    export)."""
    marian = refusal is None
    files = ModelDir(model_dir)
    manifest = read_json_object(files.vocab_dir / "manifest.json")
    result, claims = grid_run(model_dir)
    imported = stored.get("imported")
    tests = (result or {}).get("tests", {})
    front = ["---", "library_name: adlnmt" if not marian else "library_name: transformers",
             "tags:", "- translation", "- adlnmt"] + (["pipeline_tag: translation"] if marian else [])  # fmt: skip
    if imported:
        front.append(f"base_model: {yaml_string(base_model(Path(imported['path'])))}")
    if tests:
        front += ["model-index:", f"- name: {yaml_string(model_dir.name)}", "  results:"]
        for test, entry in tests.items():
            name = yaml_string(test)
            front += ["  - task: {type: translation}", f"    dataset: {{name: {name}, type: {name}}}", "    metrics:"]
            front += [f"    - {{type: {yaml_string(m)}, value: {v:.2f}}}" for m, v in entry.get("scores", {}).items()]
    front.append("---")
    canonical = stored.get("canonical", {})
    body = [f"# {markdown_text(model_dir.name)}", "",
            "A neural machine translation model built and trained with adlnmt; its architecture is a sentence "
            "of the Architecture Definition Language (Domhan 2018).", "",
            "## Architecture (ADL)", "", "```", f"encoder: {canonical.get('encoder')}",
            f"decoder: {canonical.get('decoder')}", "```", ""]  # fmt: skip
    body += [f"{stored.get('parameters', 0):,} parameters.", ""]
    body += [f"![architecture]({diagram})" if diagram else f"(No diagram: {missing}.)", ""]
    body += ["## Data", ""]
    if imported:
        body += [f"Imported from a Hugging Face MarianMT checkpoint ({markdown_text(imported['path'])}); its "
                 "training data is its source's. Files imported, by SHA-256:", ""]  # fmt: skip
        body += [f"- `{name}`: `{digest[:16]}…`" for name, digest in imported.get("files", {}).items()]
    else:
        body += [f"- data digest (SHA-256 of the prepared data's manifest): `{stored.get('data_digest')}`"]
    body += [f"- vocabulary: {manifest.get('src_vocab_size')} source / {manifest.get('tgt_vocab_size')} target "
             f"pieces ({'joint' if manifest.get('joint') else 'separate'})"]  # fmt: skip
    for split, counts in manifest.get("splits", {}).items():
        body.append(f"- {split}: {counts.get('kept', '?')} sentence pairs kept of {counts.get('read', '?')} read")
    train, model = stored.get("train", {}), stored.get("model", {})
    body += ["", "## Settings", "", "| setting | value |", "|---|---|"]
    body += [f"| model {key} | {model[key]} |" for key in MODEL_SETTINGS if key in model]
    if not imported:
        body += [f"| training {key} | {train[key]} |" for key in TRAINING_SETTINGS if train.get(key) is not None]
    validation = validation_summary(checked_records(files), bool(imported))
    body += ["", "## Validation", "", *validation, "", "## Test scores", ""]
    if tests:
        body += ["| test set | metric | score | signature |", "|---|---|---|---|"]
        for test, entry in tests.items():
            signatures = entry.get("signatures", {})
            body += [
                f"| {markdown_text(test)} | {markdown_text(m)} | {v:.2f} | `{code_in_table(signatures.get(m, ''))}` |"
                for m, v in entry.get("scores", {}).items()
            ]
    else:
        body.append("None recorded (a model trained outside `adlnmt experiment`: score a test set with "
                    "`adlnmt translate` and `adlnmt score`).")  # fmt: skip
    if result is not None:
        grid, variant, seed = (markdown_text(result.get(key)) for key in ("experiment", "variant", "seed"))
        body += ["", f"## Grid verdicts ({grid}, variant '{variant}', seed {seed})", ""]
        for claim in claims:
            c = {key: markdown_text(value) for key, value in claim.items()}
            body.append(f"- {c.get('tested_as')} ({c.get('metric')}, {c.get('test')}): **{c.get('verdict')}**, "
                        f'{c.get("summary")}; claim: "{c.get("quote")}" {c.get("where", "")}')  # fmt: skip
        body += [] if claims else ["No claim of the grid concerns this variant."]
    body += ["", "## Use", ""]
    if marian:
        body += ["```python", "from transformers import MarianMTModel, MarianTokenizer", "",
                 'tokenizer = MarianTokenizer.from_pretrained("USER/NAME")',
                 'model = MarianMTModel.from_pretrained("USER/NAME")',
                 'batch = tokenizer(["a sentence to translate"], return_tensors="pt")',
                 "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))", "```", "",
                 "Back into adlnmt: `adlnmt import --from hf-marian DIR --out MODEL`."]  # fmt: skip
    else:
        body += [f"adlnmt's own format ({refusal}): copy `config.json`, `vocab/` and `model.safetensors` (as "
                 "`best.safetensors`) into a model directory, then `adlnmt translate --model MODEL`."]  # fmt: skip
    if onnx:
        body += ["", f"The ONNX export is in `{ONNX_DIR}/`: `adlnmt translate --model {ONNX_DIR} --engine onnxruntime` "
                 "(no PyTorch needed)."]  # fmt: skip
    body += ["", "## Upload", "", "Nothing was uploaded. To publish: `huggingface-cli upload USER/NAME .` in this "
             "folder (after `huggingface-cli login`).", ""]  # fmt: skip
    return "\n".join([*front, "", *body])


def publish(model_dir: Path, out: Path, checkpoint: str = "best", onnx: bool = False) -> list[str]:
    """Write the folder ``out`` (new) for the model in ``model_dir``; the names of what it holds."""
    from adlnmt.interop.hf_export import marian_writer

    check_new_directory(out, WHAT, model_dir)
    files = ModelDir(model_dir)
    stored = files.config()
    model, data, max_len = files.load_model(checkpoint)
    write_marian, refusal = None, None
    try:
        write_marian = marian_writer(model, data)
    except UserError as err:
        refusal = str(err)
    diagram, image, missing = None, b"", ""
    try:
        from adlnmt.diagram import model_image

        image, diagram = model_image(model, "png"), "diagram.png"
    except (ImportError, UserError) as err:
        missing = str(err)

    text = card(model_dir, stored, refusal, diagram, missing, onnx)  # reads (and checks) the records before writing

    def fill(directory: Path) -> None:
        if write_marian is not None:
            write_marian(directory)
        else:
            shutil.copyfile(files.resolve(checkpoint), directory / "model.safetensors")
            shutil.copyfile(files.config_file, directory / names.CONFIG)
            shutil.copytree(files.vocab_dir, directory / names.VOCAB_DIR)
        if diagram:
            (directory / diagram).write_bytes(image)
        if onnx:
            from adlnmt.export.directory import Source
            from adlnmt.export.formats import export_model

            export_model(Source(model.eval(), data, max_len, model_dir), directory / ONNX_DIR, "onnx", "none")
        (directory / "README.md").write_text(text, encoding="utf-8")

    write_new_directory(out, fill, WHAT)
    return sorted(path.name for path in out.iterdir())


def cmd_publish(args: argparse.Namespace) -> int:
    written = publish(Path(args.model), Path(args.out), args.checkpoint, args.onnx)
    print(f"published {args.model} ({args.checkpoint}) to {args.out}: {', '.join(written)}; upload with "
          f"huggingface-cli upload USER/NAME {args.out}")  # fmt: skip
    return 0


def add_publish_command(commands: argparse._SubParsersAction) -> None:
    publish_parser = commands.add_parser("publish", help="a Hub-ready folder with a model card (no upload)")
    publish_parser.add_argument("model", metavar="MODEL", type=path_flag, help="model directory")
    publish_parser.add_argument("--out", required=True, type=path_flag, help="the folder to create (must not exist)")
    publish_parser.add_argument(
        "--checkpoint", default="best", type=path_flag, help="best, last, averaged or a .safetensors path"
    )
    publish_parser.add_argument("--onnx", action="store_true", help="also include the ONNX export (the onnx extra)")
    publish_parser.set_defaults(func=cmd_publish)
