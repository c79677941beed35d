"""`adlnmt bench decode` and `adlnmt bench train` end to end on tiny models: tables, CSV, JSON and PNG."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from adlnmt.cli import main

TINY = ["--d-model", "32", "--heads", "2", "--d-ff", "64", "--vocab", "100", "--threads", "1"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RATES = ("seconds", "sentences_per_s", "tokens_per_s", "ms_per_sentence", "peak_mb")


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def assert_positive(rows: list[dict[str, str]], keys: tuple[str, ...]) -> None:
    for row in rows:
        for key in keys:
            assert float(row[key]) > 0, (key, row)


@pytest.fixture(scope="module")
def trained_model(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tmp_path_factory.mktemp("bench") / "tiny"
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(model), "--preset", "transformer-small",
            "--d-model", "32", "--heads", "2", "--d-ff", "64", "--batch-tokens", "600", "--max-updates", "10",
            "--checkpoint-interval", "10", "--no-valid-bleu", "--no-progress", "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    return model


def test_decode_presets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "input.txt"
    source.write_text("a b c\n\none two three four five\nx y\nsix words in this line here\n")
    out = tmp_path / "out"
    argv = ["bench", "decode", "--preset", "transformer-aan,transformer", "t5-cnn-cnn", "--input", str(source),
            "--beams", "2,1", "--uncached", "--lengths", "5,10", "--sweep-beams", "1", "--sweep-sentences", "3",
            "--out", str(out), *TINY]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("machine: ") and "transformer-aan" in printed and "uncached" in printed

    rows = read_csv(out / "decode.csv")
    assert list(rows[0])[:5] == ["decoder", "kind", "parameters", "beam", "mode"]
    assert {"speedup_vs_baseline", "cache_speedup", "added_mb", "busy_beside"} <= set(rows[0])
    assert [(r["decoder"], r["beam"], r["mode"]) for r in rows[:4]] == [
        ("transformer-aan", "1", "cached"), ("transformer-aan", "1", "uncached"),
        ("transformer-aan", "2", "cached"), ("transformer-aan", "2", "uncached")]  # fmt: skip
    assert len(rows) == 3 * 2 * 2 and {r["decoder"] for r in rows} == {"transformer-aan", "transformer", "t5-cnn-cnn"}
    assert_positive(rows, (*RATES, "speedup_vs_baseline", "cache_speedup"))
    # Presets decode one random sentence per non-empty input line, forced to its word count.
    assert all(r["sentences"] == "4" and r["target_tokens"] == str(3 + 5 + 2 + 6) for r in rows)
    assert all(float(r["speedup_vs_baseline"]) == 1 for r in rows if r["decoder"] == "transformer")

    lengths = read_csv(out / "length.csv")
    assert len(lengths) == 3 * 2 * 1 * 2
    assert {(r["length"], r["mode"]) for r in lengths} == {("5", "cached"), ("5", "uncached"),
                                                           ("10", "cached"), ("10", "uncached")}  # fmt: skip
    assert all(int(r["target_tokens"]) == 3 * int(r["length"]) for r in lengths)
    assert_positive(lengths, RATES)
    assert (out / "length.png").read_bytes().startswith(PNG_MAGIC)

    record = json.loads((out / "decode.json").read_text())
    assert {"cpu", "logical_cores", "torch_threads", "torch", "device", "python", "date", "memory"} <= set(
        record["machine"]
    )
    assert record["machine"]["torch_threads"] == 1 and record["baseline"] == "transformer"
    assert len(record["decode"]) == 12 and len(record["length"]) == 12 and record["settings"]["uncached"] is True


def test_decode_trained_model(trained_model: Path, demo_data: Path, tmp_path: Path) -> None:
    source = tmp_path / "input.txt"
    source.write_text("\n".join((demo_data / "corpus" / "test.src").read_text().splitlines()[:4]) + "\n")
    out = tmp_path / "out"
    argv = ["bench", "decode", "--model", str(trained_model), "--input", str(source), "--beams", "1,2",
            "--lengths", "4", "--sweep-beams", "2", "--sweep-sentences", "2", "--uncached", "--out", str(out),
            "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    rows = read_csv(out / "decode.csv")
    assert [(r["decoder"], r["kind"], r["beam"], r["mode"]) for r in rows] == [
        ("tiny", "model", beam, mode) for beam in ("1", "2") for mode in ("cached", "uncached")]  # fmt: skip
    assert all(r["sentences"] == "4" and int(r["target_tokens"]) >= 0 for r in rows)
    assert_positive(rows, ("seconds", "sentences_per_s", "ms_per_sentence", "peak_mb"))
    lengths = read_csv(out / "length.csv")
    assert [(r["length"], r["beam"], r["target_tokens"]) for r in lengths] == [("4", "2", "8")] * 2
    assert (
        main([*argv[:-2], "--no-sweep", "--workers", "2", "--batch-size", "2", "--out", str(tmp_path / "workers")]) == 0
    )
    in_workers = read_csv(tmp_path / "workers" / "decode.csv")
    assert [r["target_tokens"] for r in in_workers] == [r["target_tokens"] for r in rows]
    assert_positive(in_workers, RATES)


def test_decode_sweep_only_and_decode_table_only(tmp_path: Path) -> None:
    common = ["bench", "decode", "--preset", "transformer-aan", "--beams", "1", *TINY]
    assert main([*common, "--no-table", "--lengths", "3", "--sweep-sentences", "2", "--out", str(tmp_path / "s")]) == 0
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["decode.json", "length.csv", "length.png"]
    assert main([*common, "--no-sweep", "--sentences", "5", "--out", str(tmp_path / "t")]) == 0
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["decode.csv", "decode.json"]
    rows = read_csv(tmp_path / "t" / "decode.csv")
    assert len(rows) == 1 and rows[0]["sentences"] == "5" and rows[0]["cache_speedup"] == ""


def test_decode_in_int8_and_without_speedups(tmp_path: Path) -> None:
    argv = ["bench", "decode", "--preset", "transformer", "--beams", "2", "--no-sweep", "--sentences", "3",
            "--precision", "int8", "--speedups-off", "topk_block,preallocate", "--out", str(tmp_path),
            *TINY]  # fmt: skip
    assert main(argv) == 0
    rows = read_csv(tmp_path / "decode.csv")
    assert len(rows) == 1 and rows[0]["sentences"] == "3"
    assert_positive(rows, RATES)
    settings = json.loads((tmp_path / "decode.json").read_text())["settings"]
    assert settings["precision"] == "int8" and settings["speedups_off"] == "topk_block,preallocate"


def test_train_synthetic_and_prepared_data(demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    common = ["bench", "train", "--preset", "transformer-aan", "transformer", "--batch-tokens", "400",
              "--updates", "3", "--warmup-updates", "1", *TINY]  # fmt: skip
    assert main([*common, "--out", str(tmp_path / "synthetic")]) == 0
    assert capsys.readouterr().out.startswith("machine: ")
    rows = read_csv(tmp_path / "synthetic" / "train.csv")
    assert [r["preset"] for r in rows] == ["transformer-aan", "transformer"]
    assert_positive(rows, ("updates_per_s", "tokens_per_s", "sentences_per_s", "peak_mb", "loss"))
    assert all(r["updates"] == "3" and r["data"] == "synthetic" and int(r["target_tokens"]) <= 3 * 400 for r in rows)
    record = json.loads((tmp_path / "synthetic" / "train.json").read_text())
    assert record["machine"]["torch_threads"] == 1 and len(record["train"]) == 2

    data = str(demo_data / "data")
    assert main([*common, "--data", data, "--out", str(tmp_path / "data")]) == 0
    rows = read_csv(tmp_path / "data" / "train.csv")
    assert len(rows) == 2 and all(r["data"] == data for r in rows)
    assert_positive(rows, ("updates_per_s", "tokens_per_s", "peak_mb"))


def test_train_reads_a_sharded_directory_as_training_does(
    demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Every shard, in training's batches and order; collated in the timed loop (shards) or before it (memory): the
    same batches, so the same tokens and loss."""
    import adlnmt.data.prepare as prepare_module
    from adlnmt.bench.train import training_batches
    from adlnmt.data.data_dir import DataDir
    from adlnmt.data.prepare import prepare
    from adlnmt.data.stream import EpochBatches, EpochPlan
    from adlnmt.train.config import TrainConfig

    corpus = demo_data / "corpus"
    monkeypatch.setattr(prepare_module, "CHUNK_PAIRS", 300)  # shard boundaries come at chunk ends
    prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt",
            tmp_path / "sharded", shard_size=300, vocab_size=100)  # fmt: skip
    data = DataDir.load(tmp_path / "sharded")
    train, ids = training_batches(data, 400, 7, seed=3)
    config = TrainConfig()
    plan = EpochPlan(train, 400, 3, config.shuffle_buffer, config.temperature)
    assert [b.tolist() for b in ids] == [b.tolist() for b in EpochBatches(plan, 0).take(7)]
    assert len(data.shards("train")) == 4 and max(int(b.max()) for b in ids) >= 300  # beyond the first shard
    rows = {}
    for source in ("shards", "memory"):
        argv = ["bench", "train", "--preset", "transformer", "--batch-tokens", "400", "--updates", "2",
                "--warmup-updates", "1", "--data", str(tmp_path / "sharded"), "--batches-from", source,
                "--out", str(tmp_path / source), *TINY]  # fmt: skip
        assert main(argv) == 0
        (rows[source],) = read_csv(tmp_path / source / "train.csv")
    assert rows["shards"]["batches_from"] == "shards" and rows["memory"]["batches_from"] == "memory"
    for key in ("updates", "target_tokens", "sentences", "loss"):
        assert rows["shards"][key] == rows["memory"][key], key
    assert main(["bench", "train", "--preset", "transformer", "--batches-from", "memory", *TINY]) == 2
    assert "--batches-from needs --data" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--preset", "transformr"], "unknown preset 'transformr'"),
        (["--preset", "@nope"], "unknown preset group '@nope'"),
        (["--preset", "transformer", "--beams", "1,x"], "--beams expects comma-separated positive integers"),
        (["--preset", "transformer", "--beams", "0,4"], "--beams expects"),
        (["--preset", "transformer", "--lengths", ""], "--lengths expects"),
        (["--preset", "transformer", "--no-table", "--no-sweep"], "nothing to measure"),
        (["--preset", "transformer", "--baseline", "rnmt"], "--baseline rnmt is not among"),
        (["--preset", "transformer", "--d-model", "32", "--d-ff", "50"], "--d-ff (50) must be a multiple"),
        (["--preset", "transformer", "--d-model", "32", "--heads", "3"], "heads=3"),
        (["--preset", "transformer", "--input", "missing.txt"], "missing.txt: input file not found"),
        (["--model", "no/such/dir"], "no/such/dir: not a model directory"),
        (["--preset", "transformer", "--speedups-off", "nope"], "--speedups-off: unknown nope"),
        ([], "needs --model DIR... or --preset NAME..."),
    ],
)
def test_decode_bad_arguments(extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["bench", "decode", *extra, "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_model_needs_input_and_numbers_are_checked(
    trained_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["bench", "decode", "--model", str(trained_model), "--out", str(tmp_path)]) == 2
    assert "needs --input FILE" in capsys.readouterr().err
    assert main(["bench", "train", "--preset", "nope", "--out", str(tmp_path)]) == 2
    for argv in (["bench", "decode", "--preset", "transformer", "--batch-size", "0"],
                 ["bench", "train", "--preset", "transformer", "--updates", "x"]):  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2


def test_every_model_is_checked_against_the_engine_before_any_is_measured(
    tiny_models: dict[str, Path], ct2_export: Path, demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A model the engine cannot run, after one it can, was refused only when its turn came: the first had been
    measured (minutes on a real model) and its rows written to --out. Now nothing is measured or written."""
    model = tiny_models["transformer"]
    out = tmp_path / "out"
    common = ["--input", str(demo_data / "corpus" / "test.src"), "--beams", "1", "--no-sweep", "--out", str(out)]
    for models, engine, refused in (([model, ct2_export], "torch", f"{ct2_export} is a ctranslate2 export, run by "
                                     "--engine ctranslate2, not torch"),
                                    ([ct2_export, model], "ctranslate2", f"{model} is a model directory; the "
                                     "ctranslate2 engine runs an export of it")):  # fmt: skip
        assert main(["bench", "decode", "--model", *map(str, models), "--engine", engine, *common]) == 2
        assert refused in capsys.readouterr().err
        assert not out.exists()


def test_train_on_a_folder_without_data_fails_before_anything_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data error is the one line: no busy-machine warning before it, no output folder made."""
    import adlnmt.bench.machine as machine

    monkeypatch.setattr(machine, "busy_warning", lambda record: "warning: the machine is busy")
    out = tmp_path / "out"
    argv = ["bench", "train", "--preset", "transformer", "--updates", "1", *TINY, "--data", str(tmp_path / "none")]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "busy" not in err and str(tmp_path / "none") in err and not out.exists()
