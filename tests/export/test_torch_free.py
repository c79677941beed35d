"""A CTranslate2 export is translated without importing PyTorch (issue 46): ``adlnmt translate`` in a fresh
interpreter, with ``--engine ctranslate2`` and with ``auto`` (which picks CTranslate2 for the export), gives the
same output as the same engine loaded in this process."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.search_options import SearchOptions
from adlnmt.translator import Translator
from test_startup import run_cli

pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'adlnmt[ct2]'")


@pytest.fixture(scope="module")
def ct2_export(tiny_models, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("torch-free") / "ct2"
    assert (
        main(["export", "--model", str(tiny_models["transformer"]), "--format", "ctranslate2", "--out", str(out)]) == 0
    )
    return out


@pytest.mark.parametrize(("engine", "beam"), [("ctranslate2", 1), ("ctranslate2", 3), ("auto", 3)])
def test_ctranslate2_translation_imports_no_torch(
    ct2_export: Path, demo_data: Path, tmp_path: Path, engine: str, beam: int
) -> None:
    lines = (demo_data / "corpus" / "test.src").read_text(encoding="utf-8").splitlines()[:20]
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join([*lines[:10], "", *lines[10:]]) + "\n", encoding="utf-8")  # an empty line too
    argv = ["translate", "--model", str(ct2_export), "--engine", engine, "--beam", str(beam), "--threads", "1",
            "--input", str(source), "--output", str(output)]  # fmt: skip
    code, loaded, result = run_cli(argv)
    assert code == 0, result.stderr
    assert "torch" not in loaded and "ctranslate2" in loaded
    expected = Translator.load(ct2_export, engine="ctranslate2").translate([*lines[:10], "", *lines[10:]],
                                                                           SearchOptions(beam=beam))  # fmt: skip
    assert output.read_text(encoding="utf-8").splitlines() == expected
    assert expected[10] == "" and all(expected[:10])
