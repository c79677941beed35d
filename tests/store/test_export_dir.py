"""store.export_dir: export.json checked, every listed file against its SHA-256, errors naming the file (the
exports themselves: tests/export)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adlnmt.errors import UserError
from adlnmt.store import ExportDir, is_export_dir
from adlnmt.store.atomic import file_sha256
from adlnmt.store.export_dir import check_files, read_manifest, recorded_diagram

MANIFEST = {"format": "onnx", "format_version": 1, "model": {}, "max_input_len": 100, "quantize": "none", "onnx": {}}


def write_manifest(directory: Path, **changes: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "export.json"
    path.write_text(json.dumps({**MANIFEST, **changes}), encoding="utf-8")
    return path


def test_a_manifest_is_read_with_its_entries_checked(tmp_path: Path) -> None:
    path = write_manifest(tmp_path)
    assert is_export_dir(tmp_path) and not is_export_dir(tmp_path / "model")
    assert read_manifest(path)["max_input_len"] == 100
    for changes, reason in (
        ({"format": "tflite"}, "unsupported export \\(format 'tflite', version 1\\)"),
        ({"format_version": 2}, "unsupported export \\(format 'onnx', version 2\\)"),
        ({"quantize": 8}, "malformed \\(quantize missing or of the wrong type\\)"),
        ({"onnx": None}, "malformed \\(onnx missing or of the wrong type\\)"),
        ({"max_input_len": True}, "malformed \\(max_input_len missing"),
        ({"max_input_len": 0}, "malformed \\(max_input_len missing"),
    ):
        write_manifest(tmp_path, **changes)
        with pytest.raises(UserError, match=f"^{path}: {reason}"):
            read_manifest(path)
    for text in ('{"format": "onnx", ', "[]"):
        path.write_text(text)
        with pytest.raises(UserError, match=f"^{path}: (damaged|malformed)"):
            read_manifest(path)


def test_every_listed_file_is_checked_against_its_hash(tmp_path: Path) -> None:
    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab" / "spm.model").write_bytes(b"pieces")
    manifest = tmp_path / "export.json"
    hashes = {"vocab/spm.model": file_sha256(tmp_path / "vocab" / "spm.model")}
    check_files(tmp_path, hashes, manifest)
    check_files(tmp_path, None, manifest)  # an export from before exports listed their files
    with pytest.raises(UserError, match=f"^{tmp_path / 'vocab' / 'spm.model'}: damaged \\(its content differs"):
        check_files(tmp_path, {"vocab/spm.model": "0" * 64}, manifest)
    with pytest.raises(UserError, match=f"^{tmp_path / 'step.onnx'}: missing from the export"):
        check_files(tmp_path, {**hashes, "step.onnx": "0" * 64}, manifest)
    for outside in ("../config.json", "/etc/passwd"):
        with pytest.raises(UserError, match=f"^{manifest}: malformed \\(lists the file '{outside}' outside"):
            check_files(tmp_path, {outside: "0" * 64}, manifest)
    with pytest.raises(UserError, match=f"^{manifest}: malformed \\(files is not a mapping"):
        check_files(tmp_path, ["vocab/spm.model"], manifest)


def test_load_names_a_directory_that_is_no_export(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=f"^{tmp_path}: not an export directory \\(no export.json; run `adlnmt export`"):
        ExportDir.load(tmp_path)


def test_the_recorded_diagram(tmp_path: Path) -> None:
    (tmp_path / "diagram.svg").write_text("<svg/>", encoding="utf-8")
    assert recorded_diagram(tmp_path, {"diagram": "diagram.svg"}) == "<svg/>"
    assert recorded_diagram(tmp_path, {"diagram": None}) is None  # exported without Graphviz
