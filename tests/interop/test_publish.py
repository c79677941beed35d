"""``adlnmt publish``: a Hub-ready folder with a model card; MarianMT files when the architecture maps, adlnmt's
otherwise; test scores and grid verdicts when the model is a grid run; nothing overwritten."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from adlnmt.cli import main
from interop.marian_fixtures import marian_dir, with_source_markers

transformers = pytest.importorskip("transformers")
NATIVE = [
    "--encoder", "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm",
    "--decoder", "pos -> repeat(1, res_nd(aan) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "--d-model", "16", "--heads", "2", "--batch-tokens", "600", "--max-updates", "2", "--checkpoint-interval", "2",
    "--no-progress", "--threads", "1", "--no-valid-bleu", "--tensorboard", "off",
]  # fmt: skip


def test_publish_an_imported_model(demo_data: Path, tmp_path: Path, capsys) -> None:
    marian_dir(demo_data / "corpus", tmp_path / "hf", seed=6)
    assert main(["import", str(tmp_path / "hf"), "--from", "hf-marian", "--out", str(tmp_path / "model")]) == 0
    assert main(["publish", str(tmp_path / "model"), "--out", str(tmp_path / "card")]) == 0
    assert "huggingface-cli upload" in capsys.readouterr().out
    files = {p.name for p in (tmp_path / "card").iterdir()}
    assert {"README.md", "model.safetensors", "config.json", "vocab.json", "source.spm", "target.spm"} <= files
    text = (tmp_path / "card" / "README.md").read_text()
    assert text.startswith("---\nlibrary_name: transformers") and "pipeline_tag: translation" in text
    assert "encoder: pos(layout=halves) -> repeat(2, res_d(mh_dot_self_att)" in text
    assert "Imported from a Hugging Face MarianMT checkpoint" in text and "huggingface-cli upload" in text
    assert "](https://github.com/)" not in text  # a placeholder link to GitHub's front page named adlnmt
    if shutil.which("dot"):
        assert (tmp_path / "card" / "diagram.png").read_bytes()[:4] == b"\x89PNG" and "](diagram.png)" in text
    transformers.MarianMTModel.from_pretrained(tmp_path / "card")
    assert main(["publish", str(tmp_path / "model"), "--out", str(tmp_path / "card")]) == 2
    assert "exists; choose a new --out" in capsys.readouterr().err


def test_publish_a_grid_run_with_scores_and_verdicts(demo_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "results" / "runs" / "AAN" / "seed-1"
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(run / "model"), *NATIVE]
    assert main(argv) == 0
    tests = {"test_2016": {"scores": {"bleu": 12.5}, "signatures": {"bleu": "nrefs:1|tok:13a"}}}
    (run / "result.json").write_text(json.dumps({"experiment": "grid-x", "variant": "AAN", "seed": 1, "tests": tests}))
    claim = {
        "first": "AAN",
        "second": "self-att",
        "tested_as": "AAN > self-att",
        "metric": "bleu",
        "test": "test_2016",
        "verdict": "inconclusive",
        "summary": "+0.1 [-1, +1] (95 %)",
        "quote": "AAN is as good",
        "where": "§4",
    }
    other = {**claim, "first": "CNN", "tested_as": "CNN > self-att"}
    (tmp_path / "results" / "claims.json").write_text(json.dumps({"grid": "grid-x", "claims": [claim, other]}))
    assert main(["publish", str(run / "model"), "--out", str(tmp_path / "card")]) == 0
    files = {p.name for p in (tmp_path / "card").iterdir()}
    assert {"README.md", "model.safetensors", "config.json", "vocab"} <= files  # adlnmt's own format
    text = (tmp_path / "card" / "README.md").read_text()
    assert "MarianMT has no counterpart of encoder layer 'pos'" in text
    assert "{type: bleu, value: 12.50}" in text and "| test_2016 | bleu | 12.50 | `nrefs:1\\|tok:13a` |" in text
    assert "AAN > self-att (bleu, test_2016): **inconclusive**" in text and "CNN > self-att" not in text
    assert "1 validated checkpoints, updates 2 to 2." in text


def test_names_in_the_card_are_text_not_markup(demo_data: Path, tmp_path: Path) -> None:
    """A folder, test set or claim named with HTML, Markdown or line breaks: the card shows each name as text. They
    were written raw: an ``<img onerror=…>`` tag, a line break that started a heading, and front-matter keys
    (``tags: [pwn]``) added by a name or ending the front matter early."""
    import yaml

    hostile = "m<img src=x onerror=alert(1)>|*b*\n---\ntags: [pwn]"
    run = tmp_path / "results" / "runs" / "v" / "seed-1"
    assert main(["train", "--data", str(demo_data / "data"), "--model", str(run / hostile), *NATIVE]) == 0
    tests = {"t: x}\n<b>": {"scores": {"bleu": 1.0}, "signatures": {"bleu": "nrefs:1|tok:13a"}}}
    (run / "result.json").write_text(json.dumps({"experiment": "g", "variant": "v", "seed": 1, "tests": tests}))
    claim = {"first": "v", "tested_as": "v > w", "metric": "bleu", "test": "t", "verdict": "holds", "quote": "<i>q"}
    (tmp_path / "results" / "claims.json").write_text(json.dumps({"grid": "g", "claims": [claim]}))
    assert main(["publish", str(run / hostile), "--out", str(tmp_path / "card")]) == 0
    text = (tmp_path / "card" / "README.md").read_text()
    _, front, body = text.split("---\n", 2)
    index = yaml.safe_load(front)["model-index"][0]
    assert index["name"] == hostile and index["results"][0]["dataset"]["name"] == "t: x}\n<b>"
    assert body.startswith("\n# m&lt;img src=x onerror=alert(1)>\\|\\*b\\*\\n---\\ntags: \\[pwn\\]\n")
    assert "<img" not in body and "<b>" not in body and "<i>" not in body and "\ntags:" not in body
    assert "| t: x}\\n&lt;b> | bleu | 1.00 | `nrefs:1\\|tok:13a` |" in body


def test_publish_with_onnx_translates_as_the_model(demo_data: Path, tmp_path: Path, capsys) -> None:
    """``--onnx``: the folder also holds the ONNX export (named in the card), which translates as the model does;
    here an import with separate vocabularies (vocab.json and target_vocab.json)."""
    pytest.importorskip("onnxruntime")
    marian_dir(demo_data / "corpus", tmp_path / "hf", seed=7, separate=True)
    assert main(["import", str(tmp_path / "hf"), "--from", "hf-marian", "--out", str(tmp_path / "model")]) == 0
    assert main(["publish", str(tmp_path / "model"), "--out", str(tmp_path / "card"), "--onnx"]) == 0
    card = tmp_path / "card"
    assert {"onnx", "vocab.json", "target_vocab.json", "README.md"} <= {p.name for p in card.iterdir()}
    assert "`adlnmt translate --model onnx --engine onnxruntime`" in (card / "README.md").read_text()
    source = tmp_path / "in.txt"
    source.write_text("\n".join((demo_data / "corpus" / "valid.src").read_text().splitlines()[:5]) + "\n")
    outputs = []
    for argv in (["--model", str(tmp_path / "model")], ["--model", str(card / "onnx"), "--engine", "onnxruntime"]):
        capsys.readouterr()
        assert main(["translate", *argv, "--input", str(source), "--beam", "2"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 5


@pytest.fixture(scope="module")
def imported(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imported")
    marian_dir(demo_data / "corpus", root / "hf", seed=8)
    assert main(["import", str(root / "hf"), "--from", "hf-marian", "--out", str(root / "model")]) == 0
    return root / "model"


def test_source_markers_publish_in_adlnmts_format(imported: Path, tmp_path: Path) -> None:
    """MarianMT's sources have no BOS: a model whose data has source markers is published in adlnmt's format."""
    model = with_source_markers(imported, tmp_path / "model")
    assert main(["publish", str(model), "--out", str(tmp_path / "card")]) == 0
    files = {p.name for p in (tmp_path / "card").iterdir()}
    assert {"README.md", "model.safetensors", "config.json", "vocab"} <= files and "vocab.json" not in files
    text = (tmp_path / "card" / "README.md").read_text()
    assert "adlnmt's own format (MarianMT has no counterpart of source markers" in text


@pytest.mark.parametrize(("out", "where"), [("model/card", "inside"), ("model/sub/../card", "inside"),
                                            ("model/.", "the folder")])  # fmt: skip
def test_an_out_inside_the_model_folder_is_refused(
    out: str, where: str, imported: Path, tmp_path: Path, capsys
) -> None:
    """``--out`` inside the model folder was accepted: publish wrote its folder into the one it read."""
    model = tmp_path / "model"
    shutil.copytree(imported, model)
    before = sorted(p.name for p in model.iterdir())
    assert main(["publish", str(model), "--out", str(tmp_path / out)]) == 2
    assert (f"error: {tmp_path / out}: {where} {model}, which publish reads (writing there would change it); "
            "choose a --out outside it") in capsys.readouterr().err  # fmt: skip
    assert sorted(p.name for p in model.iterdir()) == before


CLAIM = {"first": "v", "second": "w", "tested_as": "v > w", "metric": "bleu", "test": "test", "verdict": "holds"}
MALFORMED = {
    "metrics": ("model/metrics.jsonl", {"update": 2, "valid_ppl": "high"},
                'metrics.jsonl: the record of update 2: valid_ppl: must be a number, got "high"'),
    "score": ("result.json", {"tests": {"test": {"scores": {"bleu": "high"}}}},
              'result.json: tests.test.scores.bleu: must be a number, got "high"'),
    "test entry": ("result.json", {"tests": {"test": "oops"}},
                   'result.json: tests.test: must be an object (scores, signatures), got "oops"'),
    "tests": ("result.json", {"tests": [1, 2]}, "result.json: tests: must be an object of test sets, got [1, 2]"),
    "claim": ("../claims.json", {"grid": "g", "claims": [CLAIM, "junk"]},
              'claims.json: claims[1]: must be an object (a claim), got "junk"'),
    "claims": ("../claims.json", {"grid": "g", "claims": "notalist"},
               'claims.json: claims: must be a list of claims, got "notalist"'),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_records_are_one_clear_error(case: str, imported: Path, tmp_path: Path, capsys) -> None:
    """A grid run (result.json beside the model, claims.json above) or a training log with a malformed entry: the
    file and the entry are named, no traceback, nothing written."""
    name, content, expected = MALFORMED[case]
    run = tmp_path / "run"
    shutil.copytree(imported, run / "model")
    (run / "result.json").write_text(json.dumps({"experiment": "g", "variant": "v", "seed": 1}))
    (run / name).write_text(json.dumps(content) + ("\n" if name.endswith(".jsonl") else ""))
    assert main(["publish", str(run / "model"), "--out", str(tmp_path / "card")]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "card").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".card")]


def test_the_cards_best_checkpoint_is_the_one_training_kept() -> None:
    """With --early-stop-metric bleu, best.safetensors (what publish exports) is the checkpoint of the best BLEU; the
    card's "best" row showed the one of least perplexity instead. A model that is not an import and has no
    validated checkpoint was described as "an imported model"."""
    from adlnmt.publish import validation_summary

    records = [
        {"update": 10, "valid_ppl": 9.0, "valid_bleu": 20.0, "best_update": 10},
        {"update": 20, "valid_ppl": 8.0, "valid_bleu": 25.0, "best_update": 20},
        {"update": 30, "valid_ppl": 7.0, "valid_bleu": 24.0, "best_update": 20},  # least ppl, not the best BLEU
    ]
    assert "| best | 20 | 8.00 | 25.00 |" in validation_summary(records)
    assert "| best | 30 | 7.00 | 24.00 |" in validation_summary([{k: v for k, v in r.items() if k != "best_update"}
                                                               for r in records])  # fmt: skip
    assert "imported" not in validation_summary([])[0]
    assert "an imported model" in validation_summary([], imported=True)[0]


def test_the_base_model_of_an_import_from_the_hub_cache_is_its_hub_id() -> None:
    """An import read from the Hugging Face cache was published as ``base_model: <the snapshot's commit hash>``."""
    from adlnmt.publish import base_model

    cache = Path("/home/u/.cache/huggingface/hub")
    snapshot = cache / "models--Helsinki-NLP--opus-mt-de-en" / "snapshots" / "8fe0d6b1"
    assert base_model(snapshot) == "Helsinki-NLP/opus-mt-de-en"
    assert base_model(cache / "models--t5-small" / "snapshots" / "0ab1") == "t5-small"  # a model without an owner
    assert base_model(Path("/models/opus-mt-de-en")) == "opus-mt-de-en"
