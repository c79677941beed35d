"""ONNX export: token-identical search with ONNX Runtime on a tiny trained model of every decoder family."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.export.directory import Source
from adlnmt.export.formats import export_model
from adlnmt.inference import search
from adlnmt.inference.search import SearchOptions, translate_ids
from adlnmt.inference.translator import Translator
from adlnmt.store import ModelDir
from adlnmt.store.names import EXPORT_MANIFEST
from test_search import DECODERS

from .conftest import FAMILIES, SHORT_TABLE_ENCODER, demo_sources, short_table_export

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed: pip install 'adlnmt[onnx]'")
pytest.importorskip("onnx", reason="the onnx extra is not installed: pip install 'adlnmt[onnx]'")


def export(model_dir: Path, out: Path, quantize: str = "none") -> Translator:
    model, data, max_len = ModelDir(model_dir).load_model("best")
    export_model(Source(model.eval(), data, max_len, model_dir), out, "onnx", quantize)
    return Translator.load(out, engine="onnxruntime")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_onnx_search_is_token_identical(tiny_models, demo_data: Path, tmp_path: Path, family: str) -> None:
    torch_translator = Translator.load(tiny_models[family])
    onnx_translator = export(tiny_models[family], tmp_path / "onnx")
    assert onnx_translator.engine_name == "onnxruntime" and onnx_translator.model is None
    sources = demo_sources(torch_translator, demo_data)
    for beam in (1, 5):
        options = SearchOptions(beam=beam, batch_size=5)  # the output; lower n-best ranks of these barely trained
        # models can be near-ties that rounding reorders
        assert torch_translator.model is not None and onnx_translator.engine is not None
        expected = translate_ids(torch_translator.model, sources, options)
        found = onnx_translator.engine.translate_ids(sources, options)
        assert [[h.tokens for h in hyps] for hyps in found] == [[h.tokens for h in hyps] for hyps in expected]
        for a, b in zip(found, expected, strict=True):
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-3)


def test_manifest_lists_the_state_and_alignments_match(tiny_models, demo_data: Path, tmp_path: Path) -> None:
    torch_translator = Translator.load(tiny_models["transformer"])
    onnx_translator = export(tiny_models["transformer"], tmp_path / "onnx")
    manifest = json.loads((tmp_path / "onnx" / EXPORT_MANIFEST).read_text())
    kinds = {entry["kind"] for entry in manifest["onnx"]["state"]}
    assert kinds == {"static", "growing"}
    assert manifest["onnx"]["exporter"].startswith("torch.onnx.export")
    assert manifest["canonical"]["decoder"] and (tmp_path / "onnx" / "vocab" / "manifest.json").is_file()
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:4]
    options = SearchOptions(beam=3, nbest=2, alignments=True)
    for a, b in zip(torch_translator.search(lines, options), onnx_translator.search(lines, options), strict=True):
        assert [t.text for t in a] == [t.text for t in b]
        for x, y in zip(a, b, strict=True):
            assert torch.allclose(torch.tensor(x.alignment), torch.tensor(y.alignment), atol=1e-4)


def test_workers_search_in_forked_single_thread_processes_with_identical_output(
    tiny_models, demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forked: list[int] = []
    real = search.in_workers

    def counted(task: Callable[[int], Any], jobs: list[int], workers: int) -> list[Any]:  # search.in_workers, counted
        forked.append(workers)
        return real(task, jobs, workers)

    monkeypatch.setattr(search, "in_workers", counted)
    export(tiny_models["aan"], tmp_path / "onnx", quantize="int8")
    parallel = Translator.load(tmp_path / "onnx", options=SearchOptions(workers=2), threads=2)
    alone = Translator.load(tmp_path / "onnx", threads=2)
    assert parallel.engine is not None and alone.engine is not None
    threads = {name: s.get_session_options().intra_op_num_threads for name, s in parallel.engine.sessions.items()}
    assert set(threads.values()) == {1}  # no thread pool for a fork to leave behind
    sources = demo_sources(alone, demo_data, 24)
    for beam in (1, 4):
        options = SearchOptions(beam=beam, nbest=beam, batch_size=3)
        found = parallel.engine.translate_ids(sources, replace(options, workers=2))
        assert found == alone.engine.translate_ids(sources, options)  # tokens and scores, in input order
    assert forked == [2, 1, 2, 1]  # the forked processes searched the first of each pair


def test_int8_export_translates(tiny_models, demo_data: Path, tmp_path: Path) -> None:
    translator = export(tiny_models["aan"], tmp_path / "int8", quantize="int8")
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:6]
    assert all(translator.translate(lines, SearchOptions(beam=2)))
    with pytest.raises(UserError, match="quantization int8; it cannot run in"):
        Translator.load(tmp_path / "int8", engine="onnxruntime", precision="bf16")


def test_an_int8_export_prints_no_quantization_advice(tiny_models, tmp_path: Path) -> None:
    """ONNX Runtime's quantize_dynamic logs "Please consider to run pre-processing before quantization" through the
    root logger, once per graph; an export, whose graphs are adlnmt's own, passes none of it on (in a process of its
    own: under pytest the root logger has pytest's handler, not the stderr one logging.warning installs)."""
    argv = [sys.executable, "-m", "adlnmt", "export", "--model", str(tiny_models["aan"]), "--format", "onnx",
            "--quantize", "int8", "--out", str(tmp_path / "int8")]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "pre-processing" not in done.stderr and "WARNING:root" not in done.stderr


def test_cli_export_and_translate(tiny_models, demo_data: Path, tmp_path: Path, capsys) -> None:
    model_dir = tiny_models["rnn"]
    out = tmp_path / "onnx"
    assert main(["export", "--model", str(model_dir), "--format", "onnx", "--out", str(out)]) == 0
    source = demo_data / "corpus" / "test.src"
    lines = source.read_text().splitlines()[:5]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    outputs = {}
    for engine, model in (("torch", model_dir), ("onnxruntime", out)):
        path = tmp_path / f"{engine}.txt"
        argv = ["translate", "--model", str(model), "--input", str(tmp_path / "in.txt"), "--output", str(path),
                "--engine", engine, "--beam", "3"]  # fmt: skip
        assert main(argv) == 0
        outputs[engine] = path.read_text()
    assert outputs["torch"] == outputs["onnxruntime"]
    assert main(["translate", "--model", str(out), "--engine", "ctranslate2", "--input", str(source)]) == 2
    capsys.readouterr()
    assert main(["translate", "--model", str(model_dir), "--engine", "onnxruntime", "--input", str(source)]) == 2
    assert f"run `adlnmt export --model {model_dir} --format onnx --out DIR`" in capsys.readouterr().err


def test_a_learned_table_shorter_than_max_len_is_exported_and_bounds_the_search(
    demo_data: Path, tmp_path: Path
) -> None:
    """A decoder ``learn_pos(max_len=12)`` in a model of max_len 1,024 made the export raise (a traceback: the
    positions were warmed up to 1,024); the decoder's graphs now cover its 12 positions and outputs stop within
    them, token for token as on torch."""
    model, translator, sources = short_table_export(demo_data / "data", tmp_path / "onnx", "onnx")
    assert translator.engine is not None
    for beam in (1, 3):
        options = SearchOptions(beam=beam, max_len_extra=40)  # an untrained model runs to the length limit
        found = translator.engine.translate_ids(sources, options)
        assert [h[0].tokens for h in found] == [h[0].tokens for h in translate_ids(model, sources, options)]
        assert max(len(h[0].tokens) for h in found) <= 11


def test_each_side_of_an_onnx_export_keeps_its_own_positions(demo_data: Path, tmp_path: Path) -> None:
    """An encoder's learned table (12) beside a sinusoidal decoder: the graphs covered the 12 positions of the
    smallest table on both sides, so outputs stopped at 11 tokens where torch's ran on to the search's length limit
    (and a decoder's short table cut the sources). Each side now covers its own positions: sources are cut to the
    encoder's table, and outputs are token for token torch's."""
    model, translator, sources = short_table_export(
        demo_data / "data", tmp_path / "onnx", "onnx", SHORT_TABLE_ENCODER, DECODERS["transformer"]
    )
    assert len(sources[0]) == 12  # cut to 11 pieces + EOS
    assert translator.engine is not None
    for beam in (1, 3):
        options = SearchOptions(beam=beam, max_len_extra=40)  # an untrained model runs to the length limit
        found = translator.engine.translate_ids(sources, options)
        assert [h[0].tokens for h in found] == [h[0].tokens for h in translate_ids(model, sources, options)]
        assert max(len(h[0].tokens) for h in found) > 11
