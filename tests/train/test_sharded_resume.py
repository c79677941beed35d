"""Training from shards (issue 65): several weighted corpora in several shards, read through shuffle windows, stopped
mid-window in the first and the second epoch and resumed, ends bit for bit where an uninterrupted run ends."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from adlnmt.cli import main
from adlnmt.data import prepare as prepare_module
from adlnmt.data.prepare import Corpus, prepare
from adlnmt.train.checkpoint import load_state, save_state

from .conftest import TINY_MODEL, train_two_ranks


@pytest.fixture(scope="module")
def sharded(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sharded")
    corpus = demo_data / "corpus"
    src, tgt = (corpus / "train.src").read_text().splitlines(), (corpus / "train.tgt").read_text().splitlines()
    corpora = []
    for name, part, weight in (("de-en", slice(0, 700), 1.0), ("fr-en", slice(700, None), 2.0)):
        for side, text in (("src", src), ("tgt", tgt)):
            (root / f"{name}.{side}").write_text("".join(line + "\n" for line in text[part]))
        corpora.append(Corpus(name, root / f"{name}.src", root / f"{name}.tgt", weight))
    valid = [Corpus("de-en", corpus / "valid.src", corpus / "valid.tgt"), Corpus("fr-en", root / "fr-en.src",
                                                                                root / "fr-en.tgt")]  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prepare_module, "CHUNK_PAIRS", 100)
        manifest = prepare(out_dir=root / "data", corpora=corpora, valid=valid, vocab_size=150, shard_size=200,
                           target_tags=True)  # fmt: skip
    assert [s["pairs"] for s in manifest["shards"]["train"]] == [200, 200, 200, 100, 200, 200, 100]
    return root / "data"


def records(model: Path) -> list[dict]:
    return [json.loads(line) for line in (model / "metrics.jsonl").read_text().splitlines()]


def test_stopped_and_resumed_twice_equals_an_uninterrupted_run(sharded: Path, tmp_path: Path, capsys) -> None:
    common = ["--data", str(sharded), *TINY_MODEL, "--checkpoint-interval", "10", "--no-valid-bleu", "--lr", "1e-3",
              "--shuffle-buffer", "300", "--temperature", "1.5"]  # fmt: skip
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert main(["train", "--model", str(straight), *common, "--max-updates", "80"]) == 0
    # (700 · 1)^(1/1.5) : (500 · 2)^(1/1.5) = 0.441 : 0.559 of 1,200 pairs
    assert "each epoch draws 1200 pairs: de-en 529 pairs (44.1%), fr-en 671 pairs (55.9%)" in capsys.readouterr().err
    positions = []
    for updates in (20, 70, 80):
        assert main(["train", "--model", str(stopped), *common, "--max-updates", str(updates)]) == 0
        progress = load_state(stopped / "states" / f"update-{updates:07d}.state.pt")["progress"]
        positions.append((progress["epoch"], progress["shuffle_window"], progress["batch_in_shuffle_window"]))
    assert positions[0][0] == 0 and positions[0][1] >= 1 and positions[0][2] > 0  # stopped mid-window, epoch 1
    assert positions[1][0] == 1 and positions[1][2] > 0  # ... and in epoch 2
    a = load_file(straight / "checkpoints" / "update-0000080.safetensors")
    b = load_file(stopped / "checkpoints" / "update-0000080.safetensors")
    assert a.keys() == b.keys() and all(a[name].equal(b[name]) for name in a)
    assert [r["train_loss"] for r in records(straight)] == [r["train_loss"] for r in records(stopped)]


def test_each_corpus_is_validated_on_its_own_set(sharded: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    argv = ["train", "--data", str(sharded), "--model", str(model), *TINY_MODEL, "--max-updates", "10",
            "--checkpoint-interval", "10", "--lr", "1e-3"]  # fmt: skip
    assert main(argv) == 0
    (record,) = records(model)
    assert record["valid_ppl.fr-en"] != record["valid_ppl.de-en"]
    assert min(record["valid_ppl.fr-en"], record["valid_ppl.de-en"]) < record["valid_ppl"]
    assert record["valid_ppl"] < max(record["valid_ppl.fr-en"], record["valid_ppl.de-en"])
    assert {"valid_bleu", "valid_bleu.de-en", "valid_bleu.fr-en"} <= record.keys()


def test_a_state_saved_before_shuffle_windows_resumes_at_its_batch(demo_data: Path, tmp_path: Path) -> None:
    """A state of before the data position had windows (no ``shuffle_window``/``batch_in_shuffle_window``) resumes
    at its ``batch_in_epoch``: such data was one window."""
    common = ["--data", str(demo_data / "data"), *TINY_MODEL, "--checkpoint-interval", "10", "--no-valid-bleu"]
    straight, old = tmp_path / "straight", tmp_path / "old"
    assert main(["train", "--model", str(straight), *common, "--max-updates", "30"]) == 0
    assert main(["train", "--model", str(old), *common, "--max-updates", "20"]) == 0
    path = old / "states" / "update-0000020.state.pt"
    state = load_state(path)
    assert state["progress"]["batch_in_epoch"] == state["progress"]["batch_in_shuffle_window"] > 0
    del state["progress"]["shuffle_window"], state["progress"]["batch_in_shuffle_window"]
    save_state(state, path)
    assert main(["train", "--model", str(old), *common, "--max-updates", "30"]) == 0
    a = load_file(straight / "checkpoints" / "update-0000030.safetensors")
    b = load_file(old / "checkpoints" / "update-0000030.safetensors")
    assert all(a[name].equal(b[name]) for name in a)


@pytest.mark.slow
def test_two_ranks_stopped_and_resumed_equal_an_uninterrupted_pair(sharded: Path, tmp_path: Path) -> None:
    """Under DDP (2 gloo ranks), each rank reading its own batches of every window: stopped mid-epoch and resumed,
    the weights end bit for bit where an uninterrupted pair of ranks ends."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    launcher = [torchrun, "--standalone", "--nproc_per_node", "2"]
    flags = ["--checkpoint-interval", "5", "--shuffle-buffer", "300", "--temperature", "1.5"]
    for run, stops in (("straight", ["20"]), ("stopped", ["5", "20"])):
        (tmp_path / run).mkdir()
        for updates in stops:
            train_two_ranks(launcher, tmp_path / run, sharded, *flags, "--max-updates", updates)
    a, b = (load_file(tmp_path / run / "model" / "checkpoints" / "update-0000020.safetensors")
            for run in ("straight", "stopped"))  # fmt: skip
    assert a.keys() == b.keys() and all(a[name].equal(b[name]) for name in a)


@pytest.mark.slow
def test_two_ranks_resumed_by_one_process_deal_it_the_rest_of_the_window(sharded: Path, tmp_path: Path,
                                                                          capsys) -> None:  # fmt: skip
    """A state saved by 2 ranks mid-window, resumed by 1 process: its batches of that window start after the 2 × b
    the ranks took (adlnmt.data.stream.dealt_after), said in the log."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    flags = ["--checkpoint-interval", "5", "--shuffle-buffer", "300", "--temperature", "1.5"]
    train_two_ranks([torchrun, "--standalone", "--nproc_per_node", "2"], tmp_path, sharded, *flags,
                    "--max-updates", "5")  # fmt: skip
    model = tmp_path / "model"
    saved = load_state(model / "states" / "update-0000005.state.pt")["progress"]
    assert saved["dealt_in_shuffle_window"] == 0 and saved["batch_in_shuffle_window"] > 0
    argv = ["train", "--data", str(sharded), "--model", str(model), *TINY_MODEL, "--lr", "2e-3", "--no-valid-bleu",
            "--device", "cpu", *flags, "--max-updates", "6", "--checkpoint-interval", "1"]  # fmt: skip
    assert main(argv) == 0
    window, batch = saved["shuffle_window"], saved["batch_in_shuffle_window"]
    assert f"was saved by 2 ranks, this run has 1: the batches of window {window + 1} after its first {2 * batch} "\
        in capsys.readouterr().err  # fmt: skip
    resumed = load_state(model / "states" / "update-0000006.state.pt")["progress"]
    assert (resumed["shuffle_window"], resumed["dealt_in_shuffle_window"], resumed["batch_in_shuffle_window"]) == (
        window,
        2 * batch,
        1,
    )
