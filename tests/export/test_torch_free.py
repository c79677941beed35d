"""A CTranslate2 export is translated without importing PyTorch (issue 46): ``adlnmt translate`` in a fresh
interpreter, with ``--engine ctranslate2``, with ``auto`` and with no ``--engine`` (both: the export's own), gives the
same output as the same engine loaded in this process; so does ``adlnmt serve``'s application."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adlnmt.inference.options import SearchOptions
from adlnmt.inference.translator import Translator
from test_startup import run_cli

pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'adlnmt[ct2]'")


@pytest.mark.parametrize(("engine", "beam"), [("ctranslate2", 1), ("ctranslate2", 3), ("auto", 3), (None, 2)])
def test_ctranslate2_translation_imports_no_torch(
    ct2_export: Path, demo_data: Path, tmp_path: Path, engine: str | None, beam: int
) -> None:
    lines = (demo_data / "corpus" / "test.src").read_text(encoding="utf-8").splitlines()[:20]
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join([*lines[:10], "", *lines[10:]]) + "\n", encoding="utf-8")  # an empty line too
    argv = ["translate", "--model", str(ct2_export), *(["--engine", engine] if engine else []), "--beam", str(beam),
            "--threads", "1", "--input", str(source), "--output", str(output)]  # fmt: skip
    code, loaded, result = run_cli(argv)
    assert code == 0, result.stderr
    assert "torch" not in loaded and "ctranslate2" in loaded and "engine ctranslate2" in result.stderr
    assert not {"numpy", "yaml", "adlnmt.train.config", "adlnmt.adl.parser"} & set(loaded)  # start-up: only what runs
    expected = Translator.load(ct2_export, engine="ctranslate2").translate([*lines[:10], "", *lines[10:]],
                                                                           SearchOptions(beam=beam))  # fmt: skip
    assert output.read_text(encoding="utf-8").splitlines() == expected
    assert expected[10] == "" and all(expected[:10])


SERVE_PROBE = """
import json, sys
from fastapi.testclient import TestClient
from adlnmt.serve.app import create_app
from adlnmt.serve.limits import ServeOptions
app = create_app(ServeOptions(model=sys.argv[1], engine="ctranslate2", threads=1, allowed_hosts=("testserver",)))
with TestClient(app) as client:
    translated = client.post("/translate", json={"text": json.loads(sys.argv[2]), "beam": 2}).json()
    model = client.get("/model").json()
print(json.dumps({"translated": translated, "model": model, "torch": "torch" in sys.modules}))
"""


def test_serving_a_ctranslate2_export_imports_no_torch(ct2_export: Path, demo_data: Path) -> None:
    """The served page's model record (canonical ADL, parameters, diagram) comes from the export itself."""
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    lines = (demo_data / "corpus" / "test.src").read_text(encoding="utf-8").splitlines()[:4]
    argv = [sys.executable, "-c", SERVE_PROBE, str(ct2_export), json.dumps(lines)]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["torch"] is False
    expected = Translator.load(ct2_export, engine="ctranslate2").translate(lines, SearchOptions(beam=2))
    assert [t["translation"] for t in report["translated"]["translations"]] == expected
    model = Translator.load(tiny_model_dir(ct2_export)).model
    assert model is not None and report["model"]["parameters"] == model.parameter_count()
    assert report["model"]["encoder"] == model.canonical_encoder and report["model"]["engine"] == "ctranslate2"
    if shutil.which("dot"):
        assert report["model"]["diagram_svg"].startswith("<svg") and report["model"]["diagram_error"] is None
    else:
        assert report["model"]["diagram_svg"] is None and "dot" in report["model"]["diagram_error"]


def tiny_model_dir(export: Path) -> Path:
    """The model directory an export was made from (its manifest's ``source_model``)."""
    return Path(json.loads((export / "export.json").read_text(encoding="utf-8"))["source_model"])
