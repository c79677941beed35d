"""adlnmt distill: the distilled data directory (same vocabularies, validation split and source; the teacher's 1-best
as target; provenance), resume after an interruption (never a half-written directory taken as complete, the same
arrays as an uninterrupted run), and the refusals (another vocabulary, another plan, a directory in the way)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adlnmt.cli import main
from adlnmt.data.data_dir import MANIFEST, DataDir
from adlnmt.data.demo import write_demo_corpus
from adlnmt.data.prepare import prepare
from adlnmt.distill.kd import CHUNKS, PLAN, distill, distilling_alone, teacher_record
from adlnmt.errors import DataError, UserError
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.translator import Translator
from adlnmt.store import ModelDir
from adlnmt.store.atomic import file_sha256

OPTIONS = SearchOptions(beam=2, batch_size=16)
CHUNK = 70


class Interrupted(Exception):
    pass


class CountingEngine:
    """The translator's engine, counting its searches and failing (an interruption) after ``fail_after`` of them."""

    def __init__(self, engine: Any, fail_after: int | None = None) -> None:
        self.engine, self.fail_after, self.calls = engine, fail_after, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def translate_ids(self, *args: Any) -> Any:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise Interrupted
        self.calls += 1
        return self.engine.translate_ids(*args)


def prepared(root: Path, vocab_size: int) -> Path:
    corpus = root / "corpus"
    write_demo_corpus(corpus, size=200, seed=5)
    prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt", root / "data",
            vocab_size=vocab_size)  # fmt: skip
    return root / "data"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepared(tmp_path_factory.mktemp("kd-data"), 120)


@pytest.fixture(scope="module")
def teacher(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tmp_path_factory.mktemp("kd-teacher") / "m"
    argv = ["train", "--data", str(data), "--model", str(model), "--encoder", "pos -> res_nd(mh_dot_self_att) -> norm",
            "--decoder", "pos -> res_nd(ssru) -> res_nd(mh_dot_src_att) -> norm", "--d-model", "32", "--heads", "4",
            "--batch-tokens", "800", "--lr", "3e-3", "--max-updates", "30", "--checkpoint-interval", "30",
            "--no-valid-bleu", "--no-progress", "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    return model


def run(data: Path, teacher: Path, out: Path, engine: CountingEngine | None = None, **kwargs: Any) -> dict[str, Any]:
    translator = Translator.load(teacher)
    record = teacher_record([str(teacher)], [], translator, "fp32", "cpu", "log-linear")
    if engine is not None:
        engine.engine = translator.engine
        translator.engine = engine  # type: ignore[assignment]
    options = kwargs.pop("options", OPTIONS)
    return distill(data, out, translator, record, options, kwargs.pop("chunk_size", CHUNK), log=lambda _: None)


def arrays(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*.npy"))}


def test_the_distilled_directory_and_its_provenance(data: Path, teacher: Path, tmp_path: Path) -> None:
    out = tmp_path / "kd"
    manifest = run(data, teacher, out)
    original, distilled = DataDir.load(data), DataDir.load(out)
    assert distilled.src_vocab.to_bytes() == original.src_vocab.to_bytes()
    assert distilled.tgt_vocab.to_bytes() == original.tgt_vocab.to_bytes()
    train, source = distilled.split("train"), original.split("train")
    assert len(train) == len(source) == 200
    for i in range(len(train)):  # the source is the data's, line for line
        assert np.array_equal(train.src_pieces(i), source.src_pieces(i))
    (shard,) = distilled.shards("train")
    (source_shard,) = original.shards("train")
    src_files = [*shard["files"]["src"].values()]
    assert src_files == [*source_shard["files"]["src"].values()]
    for name in ("spm.vocab", "valid.src.tokens.npy", "valid.tgt.tokens.npy", "valid.tgt.txt", *src_files):
        assert (out / name).read_bytes() == (data / name).read_bytes()
    assert distilled.shards("valid") == original.shards("valid")
    for name in shard["bytes"]:  # the manifest's sizes and digests are those of the files written
        assert shard["bytes"][name] == (out / name).stat().st_size and shard["sha256"][name] == file_sha256(out / name)
    assert distilled.valid_references() == original.valid_references()
    # the targets are the teacher's own 1-best translations of those sources
    translator = Translator.load(teacher)
    sources = [original.source_ids(source.src_pieces(i).tolist()) for i in range(len(source))]
    expected = []
    for lo in range(0, len(sources), CHUNK):
        expected += [hyps[0].tokens for hyps in translator.engine.translate_ids(sources[lo : lo + CHUNK], OPTIONS)]
    assert [train.tgt_pieces(i).tolist() for i in range(len(train))] == expected
    assert any(expected) and expected != [source.tgt_pieces(i).tolist() for i in range(len(source))]
    # provenance
    record = manifest["distilled"]
    assert json.loads((out / MANIFEST).read_text())["distilled"] == record
    member = record["teacher"]["members"][0]
    assert member["model"] == str(teacher.resolve()) and member["checkpoint"] == "best"
    assert member["weights_sha256"] == file_sha256(ModelDir(teacher).resolve("best"))
    assert record["teacher"]["engine"] == "torch" and record["teacher"]["precision"] == "fp32"
    assert record["search"] == {"beam": 2, "batch_size": 16, "length_penalty": 1.0, "max_len_ratio": 2.0,
                                "max_len_extra": 10}  # fmt: skip
    assert record["data"] == {"path": str(data.resolve()), "manifest_sha256": file_sha256(data / MANIFEST)}
    assert record["sentences"] == len(train) and record["chunk_size"] == CHUNK
    assert record["train_tgt_sha256"] == {name: file_sha256(out / name) for name in shard["files"]["tgt"].values()}
    assert manifest["splits"]["train"]["tgt_pieces"] == sum(len(t) for t in expected)
    assert not (out / PLAN).exists() and not (out / CHUNKS).exists()


def test_an_interrupted_distillation_resumes_to_the_same_arrays(data: Path, teacher: Path, tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    run(data, teacher, whole)
    out = tmp_path / "kd"
    with pytest.raises(Interrupted):
        run(data, teacher, out, CountingEngine(None, fail_after=2))  # type: ignore[arg-type]
    assert len(list((out / CHUNKS).glob("*.npy"))) == 2 and (out / PLAN).is_file()
    assert not (out / MANIFEST).exists()
    with pytest.raises(DataError, match="no manifest"):
        DataDir.load(out)  # never taken as a complete data directory
    resumed = CountingEngine(None)  # type: ignore[arg-type]
    run(data, teacher, out, resumed)
    assert resumed.calls == -(-200 // CHUNK) - 2  # only the chunks not committed
    assert arrays(out) == arrays(whole)
    again = CountingEngine(None)  # type: ignore[arg-type]
    run(data, teacher, out, again)  # complete: nothing to do
    assert again.calls == 0 and arrays(out) == arrays(whole)


def test_a_damaged_chunk_is_translated_again(data: Path, teacher: Path, tmp_path: Path) -> None:
    out = tmp_path / "kd"
    with pytest.raises(Interrupted):
        run(data, teacher, out, CountingEngine(None, fail_after=1))  # type: ignore[arg-type]
    chunk = next((out / CHUNKS).glob("*.npy"))
    chunk.write_bytes(chunk.read_bytes()[:-8])
    resumed = CountingEngine(None)  # type: ignore[arg-type]
    run(data, teacher, out, resumed)
    assert resumed.calls == -(-200 // CHUNK)
    whole = tmp_path / "whole"
    run(data, teacher, whole)
    assert arrays(out) == arrays(whole)


def test_other_settings_do_not_resume_or_overwrite(data: Path, teacher: Path, tmp_path: Path) -> None:
    out = tmp_path / "kd"
    with pytest.raises(Interrupted):
        run(data, teacher, out, CountingEngine(None, fail_after=1))  # type: ignore[arg-type]
    before = arrays(out / CHUNKS)
    with pytest.raises(UserError, match="unfinished distillation with other search"):
        run(data, teacher, out, options=SearchOptions(beam=3, batch_size=16))
    with pytest.raises(UserError, match="unfinished distillation with other chunk_size"):
        run(data, teacher, out, chunk_size=50)
    assert arrays(out / CHUNKS) == before
    run(data, teacher, out)
    complete = arrays(out)
    with pytest.raises(UserError, match="holds data distilled with other search"):
        run(data, teacher, out, options=SearchOptions(beam=3, batch_size=16))
    assert arrays(out) == complete


def test_the_default_precision_named_or_not_is_the_same_teacher(
    data: Path, teacher: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model directory's teacher runs in fp32 by default: ``--precision fp32`` given on resuming (or again on a
    complete distillation) is the same teacher; another precision is refused, saying what of the teacher differs."""
    out = tmp_path / "kd"
    argv = ["distill", "--data", str(data), "--model", str(teacher), "--out", str(out), "--beam", "2",
            "--batch-size", "16", "--chunk-size", str(CHUNK)]  # fmt: skip
    assert main(argv) == 0
    complete = arrays(out)
    capsys.readouterr()
    assert main([*argv, "--precision", "fp32"]) == 0
    assert "already distilled" in capsys.readouterr().out
    assert main([*argv, "--precision", "bf16"]) == 2
    assert "holds data distilled with other teacher (precision)" in capsys.readouterr().err
    assert arrays(out) == complete


def test_a_directory_in_the_way_is_refused(data: Path, teacher: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not into the data directory itself"):
        run(data, teacher, data)
    other = tmp_path / "prepared"
    other.mkdir()
    (other / MANIFEST).write_text((data / MANIFEST).read_text())
    with pytest.raises(UserError, match="already holds a prepared data directory"):
        run(data, teacher, other)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine\n")
    with pytest.raises(UserError, match="exists and is not an unfinished distillation"):
        run(data, teacher, busy)
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    held = tmp_path / "held"  # another process distilling into it (a grid's step started again beside its first)
    with distilling_alone(held), pytest.raises(UserError, match="another process is distilling into this directory"):
        run(data, teacher, held)
    assert not any(held.iterdir())


def test_a_data_directory_missing_a_file_it_names_is_refused_before_anything_is_translated(
    data: Path, teacher: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    (copy / "valid.tgt.txt").unlink()
    engine = CountingEngine(None)
    with pytest.raises(UserError, match=rf"^{copy}: valid.tgt.txt missing \(its manifest names them\)"):
        run(copy, teacher, tmp_path / "out", engine)
    assert engine.calls == 0 and not (tmp_path / "out").exists()


def test_a_teacher_of_other_vocabularies_is_refused(teacher: Path, tmp_path: Path) -> None:
    other = prepared(tmp_path / "other", 100)
    with pytest.raises(UserError, match="the teacher's source vocabulary differs from the one of"):
        run(other, teacher, tmp_path / "kd")
    assert not (tmp_path / "kd").exists()


def test_search_limits_are_checked_before_anything_is_written(data: Path, teacher: Path, tmp_path: Path) -> None:
    """The teacher's search is checked as ``translate`` checks it: a beam wider than the vocabulary, output lengths
    beyond memory (the teacher has sinusoidal positions)."""
    refused = [
        (SearchOptions(beam=100_000), "--beam 100000: wider than the target vocabulary"),
        (SearchOptions(max_len_ratio=1e30), r"--max-len-ratio 1e\+30 --max-len-extra 10: outputs of up to"),
    ]
    for options, message in refused:
        with pytest.raises(UserError, match=message):
            run(data, teacher, tmp_path / "kd", options=options)
        assert not (tmp_path / "kd").exists()


def test_the_command(data: Path, teacher: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "kd"
    argv = ["distill", "--data", str(data), "--model", str(teacher), "--out", str(out), "--beam", "2",
            "--batch-size", "16", "--chunk-size", str(CHUNK)]  # fmt: skip
    assert main(argv) == 0
    assert "200 training targets distilled" in capsys.readouterr().out
    record = DataDir.load(out).manifest["distilled"]
    assert record["search"]["beam"] == 2 and record["teacher"]["members"][0]["checkpoint"] == "best"
    assert main(argv) == 0
    assert "already distilled" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*argv[:-2], "--chunk-size", "0"])
    assert "--chunk-size: must be >= 1, got 0" in capsys.readouterr().err


def test_an_export_or_an_ensemble_teaches_with_its_provenance(data: Path, teacher: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed: pip install 'adlnmt[onnx]'")
    pytest.importorskip("onnx", reason="the onnx extra is not installed: pip install 'adlnmt[onnx]'")
    from adlnmt.export.directory import Source
    from adlnmt.export.formats import export_model
    from adlnmt.inference.ensemble import load_ensemble
    from adlnmt.store.names import EXPORT_MANIFEST

    model, vocab, max_len = ModelDir(teacher).load_model("best")
    export_model(Source(model.eval(), vocab, max_len, teacher), tmp_path / "onnx", "onnx", "none")
    exported = Translator.load(tmp_path / "onnx", engine="onnxruntime")
    record = teacher_record([str(tmp_path / "onnx")], [], exported, "fp32", "cpu", "log-linear")
    manifest = distill(data, tmp_path / "kd-onnx", exported, record, OPTIONS, CHUNK, log=lambda _: None)
    member = manifest["distilled"]["teacher"]["members"][0]
    assert member == {"export": str((tmp_path / "onnx").resolve()), "format": "onnx", "quantize": "none",
                      "manifest_sha256": file_sha256(tmp_path / "onnx" / EXPORT_MANIFEST)}  # fmt: skip
    assert manifest["distilled"]["teacher"]["engine"] == "onnxruntime"
    assert len(DataDir.load(tmp_path / "kd-onnx").split("train")) == 200

    ensemble = load_ensemble([teacher, teacher], ["best", "last"])
    record = teacher_record([str(teacher)], ["best", "last"], ensemble, "fp32", "cpu", "linear")
    assert [m["checkpoint"] for m in record["members"]] == ["best", "last"] and record["combine"] == "linear"
    manifest = distill(data, tmp_path / "kd-ensemble", ensemble, record, OPTIONS, CHUNK, log=lambda _: None)
    assert manifest["distilled"]["teacher"] == record


@pytest.mark.parametrize("point", ["000001.npy:written", "000001.npy:replaced", "manifest.json:written"])
def test_a_killed_distillation_resumes_to_the_same_arrays(data: Path, teacher: Path, tmp_path: Path, point: str
                                                         ) -> None:  # fmt: skip
    """SIGKILL at the commit of a chunk (its temporary complete, or just renamed) or of the manifest: the directory is
    not a data directory, and the same command resumes it to the arrays of an uninterrupted run."""
    from faults.harness import environment

    whole = tmp_path / "whole"
    run(data, teacher, whole)
    out = tmp_path / "kd"
    argv = [sys.executable, "-m", "adlnmt", "distill", "--data", str(data), "--model", str(teacher), "--out", str(out),
            "--beam", "2", "--batch-size", "16", "--chunk-size", str(CHUNK), "--threads", "1"]  # fmt: skip
    killed = subprocess.run(argv, env=environment(f"kill@{point}"), capture_output=True, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    with pytest.raises(DataError, match="no manifest"):
        DataDir.load(out)
    done = subprocess.run(argv, env=environment(), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "resuming an interrupted distillation" in done.stdout
    assert arrays(out) == arrays(whole)
    assert not (out / CHUNKS).exists()


def test_a_terminated_distillation_says_so_and_resumes(data: Path, teacher: Path, tmp_path: Path) -> None:
    """SIGTERM (a cluster's preemption, the grid's stop) after a chunk is committed: one line on stderr saying how to
    resume, the process ended by the signal as before (a parent sees -15), and the same command resumes."""
    from faults.harness import environment

    out = tmp_path / "kd"
    argv = [sys.executable, "-m", "adlnmt", "distill", "--data", str(data), "--model", str(teacher), "--out", str(out),
            "--beam", "2", "--batch-size", "16", "--chunk-size", str(CHUNK), "--threads", "1"]  # fmt: skip
    stopped = subprocess.run(argv, env=environment("term@000001.npy:replaced"), capture_output=True, text=True,
                             check=False)  # fmt: skip
    assert stopped.returncode == -signal.SIGTERM, stopped.stderr
    assert stopped.stderr.strip().splitlines()[-1] == (
        f"SIGTERM: distillation stopped; {out} keeps its translated chunks and the same command resumes from them"
    )
    assert "Traceback" not in stopped.stderr
    done = subprocess.run(argv, env=environment(), capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "resuming an interrupted distillation (2 chunk(s) done)" in done.stdout, done.stderr


def test_a_sharded_directory_is_distilled_shard_by_shard_and_trains(
    data: Path, teacher: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three training shards (80, 80, 40 pairs) of the same corpus and vocabulary: the same sources and targets as
    distilling the one-shard directory in chunks on the same boundaries, shard files with their digests, and a
    student trains on the result."""
    import adlnmt.data.prepare as prepare_module

    corpus = data.parent / "corpus"
    monkeypatch.setattr(prepare_module, "CHUNK_PAIRS", 40)  # shard boundaries come at chunk ends
    prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt",
            tmp_path / "sharded", shard_size=80, vocab_from=teacher / "vocab")  # fmt: skip
    sharded = DataDir.load(tmp_path / "sharded")
    assert [s["pairs"] for s in sharded.shards("train")] == [80, 80, 40]
    whole = DataDir.load(data)
    manifest = run(tmp_path / "sharded", teacher, tmp_path / "kd", chunk_size=40)
    run(data, teacher, tmp_path / "kd-one", chunk_size=40)
    one = DataDir.load(tmp_path / "kd-one").split("train")
    distilled = DataDir.load(tmp_path / "kd")
    entries = distilled.shards("train")
    assert [s["pairs"] for s in entries] == [80, 80, 40] and manifest["distilled"]["sentences"] == 200
    position = 0
    for index, entry in enumerate(entries):
        shard, source = distilled.open_shard("train", index), sharded.open_shard("train", index)
        assert entry["files"]["src"] == sharded.shards("train")[index]["files"]["src"]
        for i in range(len(shard)):
            assert np.array_equal(shard.src_pieces(i), source.src_pieces(i))
            assert np.array_equal(shard.src_pieces(i), whole.split("train").src_pieces(position))
            assert np.array_equal(shard.tgt_pieces(i), one.tgt_pieces(position))
            position += 1
        for name in entry["bytes"]:
            assert entry["sha256"][name] == file_sha256(tmp_path / "kd" / name)
    assert manifest["splits"]["train"]["tgt_pieces"] == sum(len(one.tgt_pieces(i)) for i in range(len(one)))
    assert manifest["corpora"]["train"]["train"]["tgt_pieces"] == manifest["splits"]["train"]["tgt_pieces"]
    student = tmp_path / "student"
    argv = ["train", "--data", str(tmp_path / "kd"), "--model", str(student), "--encoder",
            "pos -> res_nd(mh_dot_self_att) -> norm", "--decoder", "pos -> res_nd(mh_dot_src_att) -> norm",
            "--d-model", "16", "--heads", "2", "--batch-tokens", "800", "--max-updates", "4",
            "--checkpoint-interval", "4", "--no-valid-bleu", "--no-progress", "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    assert ModelDir(student).resolve("last").is_file()


def test_a_format_1_directory_is_refused_with_the_way_out(data: Path, teacher: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    manifest = json.loads((data / MANIFEST).read_text())
    files = {split: entries[0]["files"] for split, entries in manifest.pop("shards").items()}
    (old / MANIFEST).write_text(json.dumps({**manifest, "format_version": 1, "files": files}))
    for name in manifest["spm"].values():
        (old / name).write_bytes((data / name).read_bytes())
    with pytest.raises(UserError, match=r"format 1 .*--vocab-from TEACHER_MODEL"):
        run(old, teacher, tmp_path / "kd")
    assert not (tmp_path / "kd").exists()


def test_an_archived_distillation_makes_the_same_directory_again(data: Path, teacher: Path, tmp_path: Path) -> None:
    """The archive keeps the targets' ids and the provenance, no source; restored from it and the prepared data, the
    directory is the distilled one, file for file; what cannot be that is refused with nothing written."""
    from adlnmt.distill.archived import archive, restore

    manifest = run(data, teacher, tmp_path / "kd")
    folder = tmp_path / "archive"
    archive(tmp_path / "kd", folder)
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.*")) == [
        "record.json",
        "targets/000000.npy",
    ]
    assert restore(data, folder, tmp_path / "again") == manifest
    assert arrays(tmp_path / "again") == arrays(tmp_path / "kd")
    with pytest.raises(UserError, match="again: exists and is not empty"):
        restore(data, folder, tmp_path / "again")
    with pytest.raises(UserError, match="was distilled from data with other vocabularies than"):
        restore(prepared(tmp_path / "other", 100), folder, tmp_path / "other-kd")
    np.save(folder / "targets" / "000000.npy", np.load(folder / "targets" / "000000.npy")[:-5])
    with pytest.raises(UserError, match=r"000000\.npy: missing or damaged \(shard 0's targets\)"):
        restore(data, folder, tmp_path / "damaged")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again", "archive", "kd", "other"]  # nothing left behind
