"""Export directories are written atomically and checked when loaded: a failed export leaves the previous one, a
damaged one is an error naming the file (in translate and at serve's start), never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from adlnmt.atomic import process_alive
from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.export import formats
from adlnmt.serve.app import create_app
from adlnmt.serve.limits import ServeOptions
from adlnmt.store.atomic import FAULT_HOOK
from adlnmt.store.names import EXPORT_MANIFEST

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed: pip install 'adlnmt[onnx]'")
pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'adlnmt[ct2]'")


def export(model_dir: Path, out: Path, export_format: str) -> int:
    return main(["export", "--model", str(model_dir), "--format", export_format, "--out", str(out)])


@pytest.fixture(scope="module")
def exports(tiny_models, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("exports")
    for export_format in ("onnx", "ctranslate2"):
        assert export(tiny_models["transformer"], root / export_format, export_format) == 0
    return {name: root / name for name in ("onnx", "ctranslate2")}


def contents(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_failed_export_leaves_the_previous_one(
    tiny_models, exports: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A full disk midway (the writers' OSErrors often carry no file name): the previous export is intact and the
    message names the export directory."""
    out = tmp_path / "out"
    shutil.copytree(exports["onnx"], out)
    before = contents(out)

    def full_disk(source, directory: Path, quantize: str) -> dict:
        (directory / "encoder.onnx").write_bytes(b"half a graph")
        raise OSError(28, "No space left on device")

    monkeypatch.setitem(formats.WRITERS, "onnx", full_disk)
    assert export(tiny_models["transformer"], out, "onnx") == 2
    assert f"error: {out}: cannot write the export (No space left on device)" in capsys.readouterr().err
    assert contents(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary directory left


def test_out_must_not_be_the_model_directory_or_other_files(tiny_models, tmp_path: Path, capsys) -> None:
    model_dir = tiny_models["transformer"]
    before = sorted(p.name for p in model_dir.rglob("*"))
    assert export(model_dir, model_dir, "onnx") == 2
    assert f"error: {model_dir}: the folder {model_dir}, which the export reads" in capsys.readouterr().err
    assert sorted(p.name for p in model_dir.rglob("*")) == before
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("keep me")
    assert export(model_dir, other, "onnx") == 2
    assert "exists and is not an export directory" in capsys.readouterr().err
    assert [p.name for p in other.iterdir()] == ["todo.txt"]


@pytest.mark.parametrize("export_format", ["onnx", "ctranslate2"])
@pytest.mark.parametrize(("out", "where"), [("onnx", "inside"), ("sub/../onnx", "inside"), (".", "the folder")])
def test_an_out_inside_the_model_folder_is_refused(
    export_format: str, out: str, where: str, tiny_models, capsys
) -> None:
    """Only an ``--out`` equal to the model folder was refused: one inside it was written into the folder read."""
    model_dir = tiny_models["transformer"]
    before = sorted(model_dir.rglob("*")), contents(model_dir)
    assert export(model_dir, model_dir / out, export_format) == 2
    assert (f"error: {model_dir / out}: {where} {model_dir}, which the export reads (writing there would change it); "
            "choose a --out outside it") in capsys.readouterr().err  # fmt: skip
    assert (sorted(model_dir.rglob("*")), contents(model_dir)) == before


def test_an_export_over_another_format_keeps_none_of_its_files(
    tiny_models, exports: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    shutil.copytree(exports["onnx"], out)
    assert export(tiny_models["transformer"], out, "ctranslate2") == 0
    assert not list(out.rglob("*.onnx"))
    assert contents(out).keys() == contents(exports["ctranslate2"]).keys()


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def rewrite_manifest(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        manifest = json.loads(path.read_text())
        path.write_text(json.dumps(change(manifest)))

    return damage


DAMAGES: dict[str, tuple[str, str, Callable[[Path], None]]] = {  # name → format, damaged file, damage
    "truncated onnx": ("onnx", "step.onnx", truncate),
    "empty onnx": ("onnx", "encoder.onnx", lambda path: path.write_bytes(b"")),
    "missing onnx": ("onnx", "init.onnx", Path.unlink),
    "garbage export.json": ("onnx", EXPORT_MANIFEST, lambda path: path.write_bytes(b"{\xff")),
    "export.json a list": ("onnx", EXPORT_MANIFEST, lambda path: path.write_text("[1, 2]")),
    "export.json without model": ("onnx", EXPORT_MANIFEST, rewrite_manifest(lambda m: {**m, "model": None})),
    "export.json wrong section": ("onnx", EXPORT_MANIFEST, rewrite_manifest(lambda m: {**m, "onnx": []})),
    "missing vocabulary": ("onnx", "vocab/spm.model", Path.unlink),
    "truncated model.bin": ("ctranslate2", "ctranslate2/model.bin", truncate),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_export_is_an_error_naming_the_file(
    exports: dict[str, Path], demo_data: Path, tmp_path: Path, capsys, damage: str
) -> None:
    export_format, name, change = DAMAGES[damage]
    out = tmp_path / "export"
    shutil.copytree(exports[export_format], out)
    change(out / name)
    source = demo_data / "corpus" / "test.src"
    assert main(["translate", "--model", str(out), "--input", str(source), "--engine", "auto"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out / name}: ") and "Traceback" not in err, err
    with pytest.raises(UserError, match=f"^{out / name}: "):  # serve: before the port is bound
        create_app(ServeOptions(model=str(out)))


def test_a_damaged_graph_of_an_export_without_hashes_names_the_export(exports: dict[str, Path], tmp_path: Path):
    """Exports written before export.json listed their files: the engine's load error, without its internals."""
    out = tmp_path / "export"
    shutil.copytree(exports["onnx"], out)
    rewrite_manifest(lambda m: {k: v for k, v in m.items() if k != "files"})(out / EXPORT_MANIFEST)
    truncate(out / "step.onnx")
    with pytest.raises(
        UserError, match=f"^{out}: the onnx export cannot be loaded \\(\\w+\\); export the model again$"
    ):
        create_app(ServeOptions(model=str(out), engine="onnxruntime"))


def export_in_subprocess(model_dir: Path, out: Path, fault: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "adlnmt", "export", "--model", str(model_dir), "--format", "onnx", "--out", str(out)]
    environment = {**os.environ, FAULT_HOOK: fault}
    return subprocess.run(argv, capture_output=True, text=True, env=environment, timeout=600)


def test_sigterm_and_sigkill_during_an_export_leave_the_previous_one_and_no_temporary(
    tiny_models, exports: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 69 point 8: SIGTERM exited 143 without a message and left ``.OUT.tmp-PID`` beside --out forever."""
    model_dir = tiny_models["transformer"]
    out = tmp_path / "out"
    shutil.copytree(exports["onnx"], out)
    before = contents(out)
    done = export_in_subprocess(model_dir, out, f"term@{EXPORT_MANIFEST}:written")
    assert done.returncode == -signal.SIGTERM
    assert f"SIGTERM: export stopped, its temporary files removed; {out} is left as it was" in done.stderr
    assert "Traceback" not in done.stderr
    assert contents(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    # SIGKILL cannot be caught: the next export tidies what it left, also the previous export moved aside
    for point in (f"{EXPORT_MANIFEST}:written", "out:moved-aside"):
        assert export_in_subprocess(model_dir, out, f"kill@{point}").returncode == -signal.SIGKILL
        assert any(p.name.startswith(".out.tmp-") for p in tmp_path.iterdir())
    assert not out.exists() and any(p.name.startswith(".out.old-") for p in tmp_path.iterdir())
    assert export(model_dir, out, "onnx") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert contents(out) == before


def test_tidying_touches_only_the_leftovers_of_its_own_out(tmp_path: Path) -> None:
    """``--out`` names holding glob characters, and another export's leftovers whose name starts like ours, are
    told apart: only ``.OUT.KIND-PID`` of a gone process is tidied (a sibling ``a.old-x``'s moved-aside export was
    put back as ``a``)."""
    from adlnmt.export.directory import tidy_leftovers

    dead = next(pid for pid in range(2**22 - 1, 1, -1) if not process_alive(pid))
    for name in ("a", "b[1]"):
        out = tmp_path / name
        ours, sibling, other = (tmp_path / f".{name}.tmp-{dead}", tmp_path / f".{name}.old-x.old-{dead}",
                                tmp_path / f".{name[0]}.tmp-{dead}")  # fmt: skip
        for folder in (ours, sibling, other):
            folder.mkdir(exist_ok=True)
        tidy_leftovers(out)
        assert not ours.exists() and sibling.is_dir() and not out.exists()
        assert other.is_dir() or name == "a"  # '.b.tmp-PID' belongs to an export to 'b', not to 'b[1]'
