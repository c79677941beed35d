"""Hostile flags of ``adlnmt translate`` (issue 69 points 9, 15 and 20): a beam is bounded by the target vocabulary
and the search's scores by the memory available before any search; a flag the command would silently ignore is an
error; errors say what is wrong in plain words."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.inference import translator as translator_module
from adlnmt.inference.commands import add_model_arguments
from adlnmt.inference.options import SearchOptions, sampling_rule
from adlnmt.inference.translator import Translator, output_bytes, search_bytes

SMALL = [
    "--encoder", "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm",
    "--decoder", "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "--d-model", "32", "--heads", "4", "--batch-tokens", "800", "--threads", "1", "--no-progress", "--no-valid-bleu",
    "--max-updates", "4", "--checkpoint-interval", "4",
]  # fmt: skip


@pytest.fixture(scope="module")
def model(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model_dir = tmp_path_factory.mktemp("flags") / "model"
    assert main(["train", "--data", str(demo_data / "data"), "--model", str(model_dir), *SMALL]) == 0
    return model_dir


def translate(model: Path, tmp_path: Path, *flags: str) -> list[str]:
    source = tmp_path / "in.txt"
    source.write_text("The queen does not wait.\n", encoding="utf-8")
    return ["translate", "--model", str(model), "--input", str(source), "--output", str(tmp_path / "out.txt"), *flags]


def test_a_beam_wider_than_the_vocabulary_is_refused_before_searching(model: Path, tmp_path: Path, capsys) -> None:
    assert main(translate(model, tmp_path, "--beam", "100000")) == 2
    err = capsys.readouterr().err
    assert err == "error: --beam 100000: wider than the target vocabulary (150 pieces); a beam of at most 150 " \
                  "hypotheses can tell them apart\n"  # fmt: skip
    assert not (tmp_path / "out.txt").exists()


def test_top_k_sampling_wider_than_the_vocabulary_is_refused_before_sampling(
    model: Path, tmp_path: Path, capsys
) -> None:
    """``topk:K`` with K above the vocabulary was the whole distribution in silence; K equal to it still is."""
    assert main(translate(model, tmp_path, "--sampling", "topk:151")) == 2
    assert capsys.readouterr().err == "error: --sampling topk:151: K exceeds the target vocabulary (150 pieces); use " \
                                      "K <= 150 (topk:150 samples from the whole vocabulary)\n"  # fmt: skip
    assert not (tmp_path / "out.txt").exists()
    assert main(translate(model, tmp_path, "--sampling", "topk:150")) == 0


def test_a_search_that_would_not_fit_in_memory_is_refused(model: Path, monkeypatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setattr(translator_module, "available_memory", lambda device: 2**16)  # a machine with 64 KiB free
    assert main(translate(model, tmp_path, "--beam", "150")) == 2
    err = capsys.readouterr().err
    assert "--beam 150 --batch-size 64: the search's scores alone would take about" in err
    assert "lower --beam or --batch-size" in err
    assert search_bytes(SearchOptions(beam=150), 150, sentences=1) == 12 * 150 * 150  # one sentence's rows only


def test_output_lengths_beyond_memory_are_refused_before_searching(
    model: Path, monkeypatch, tmp_path: Path, capsys
) -> None:
    """Sinusoidal positions bound no output length: ``--max-len-ratio`` and ``--max-len-extra`` are bounded by the
    memory the longest output's hypotheses would take (an absurd value once overflowed into a traceback)."""
    assert main(translate(model, tmp_path, "--max-len-ratio", "1e30")) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --max-len-ratio 1e+30 --max-len-extra 10: outputs of up to 1.2e+31 tokens (for a ")
    assert "lower --max-len-ratio or --max-len-extra\n" in err and not (tmp_path / "out.txt").exists()
    monkeypatch.setattr(translator_module, "available_memory", lambda device: 2**16)  # a machine with 64 KiB free
    assert main(translate(model, tmp_path, "--max-len-extra", "1000")) == 2
    assert capsys.readouterr().err.startswith("error: --max-len-ratio 2 --max-len-extra 1000: outputs of up to 1,0")
    assert main(translate(model, tmp_path)) == 0  # the default lengths fit
    translator = Translator.load(model)
    options = SearchOptions(max_len_ratio=1e30)
    with pytest.raises(UserError, match="--max-len-ratio 1e"):
        translator.check(options, sentences=1, longest_source=8)
    translator.engine.max_output_len = 64  # as with learned positions: the search stops within them
    translator.check(options, sentences=1, longest_source=8)
    assert output_bytes(SearchOptions(beam=2, alignments=True), 3, 10) == 6 * 30 * (8 + 4 * 10)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--temperature", "0.5"], "--temperature 0.5 shapes sampling only: add --sampling"),
        (["--seed", "7"], "--seed 7 shapes sampling only: add --sampling"),
        (["--combine", "linear"], "--combine linear combines an ensemble: give several --model or --checkpoint"),
        # the search would decode eagerly instead, saying so in a Python warning with its source path
        (["--cuda-graphs"], "--cuda-graphs replays decoder steps on a CUDA device: add --device cuda (not cpu)"),
        (["--cuda-graphs", "--device", "cuda", "--uncached"], "--cuda-graphs and --uncached do not go together"),
        (["--cuda-graphs", "--device", "cuda:0", "--alignments"], "--cuda-graphs and --alignments do not go together"),
    ],
)
def test_an_option_the_search_would_ignore_is_an_error(
    flags: list[str], message: str, model: Path, tmp_path: Path, capsys
) -> None:
    assert main(translate(model, tmp_path, *flags)) == 2
    assert capsys.readouterr().err.startswith(f"error: {message}")


def test_the_threads_help_says_that_workers_run_on_one_thread_each() -> None:
    """--workers N searches on N single-thread workers on every engine (forked torch workers cannot run several:
    :mod:`adlnmt.inference.workers`), so --threads is then not used, and its help says so."""
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    threads = next(action for action in parser._actions if "--threads" in action.option_strings)
    assert "not used with --workers N > 1" in threads.help


def test_sampling_out_of_range_is_not_called_unknown() -> None:
    from adlnmt.errors import UserError

    with pytest.raises(UserError, match=r"^sampling 'topk:0': K must be an integer >= 1$"):
        sampling_rule("topk:0")
    with pytest.raises(UserError, match=r"^sampling 'topp:1.5': P must be a number in \(0, 1\]$"):
        sampling_rule("topp:1.5")
    with pytest.raises(UserError, match=r"^unknown sampling 'top:3'"):
        sampling_rule("top:3")


def test_an_export_refuses_a_precision_or_checkpoint_it_would_ignore(model: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    out = tmp_path / "int8"
    assert main(["export", "--model", str(model), "--format", "onnx", "--quantize", "int8", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(translate(out, tmp_path, "--precision", "fp32")) == 2
    assert "is exported with quantization int8; it cannot run in fp32" in capsys.readouterr().err
    assert main(translate(out, tmp_path, "--checkpoint", "last")) == 2
    assert "is an export directory: it holds the one checkpoint it was exported from" in capsys.readouterr().err
    assert main(translate(out, tmp_path, "--engine", "ctranslate2")) == 2
    assert f"{out} is an onnx export, run by --engine onnxruntime" in capsys.readouterr().err
    assert main(translate(out, tmp_path)) == 0  # as exported
    assert Translator.load(out).engine_name == "onnxruntime"


def test_the_engine_table_of_the_docs_is_the_engines_capabilities() -> None:
    """docs/translating.md, *What each engine gives*: a row per search flag of ``FEATURES``, each cell the engine's
    ``Capabilities`` (yes, possibly with a note, or no)."""
    from adlnmt.inference.engine import CAPABILITIES, FEATURES

    text = (Path(__file__).parents[1] / "docs" / "translating.md").read_text(encoding="utf-8")
    lines = text[text.index("### What each engine gives") :].splitlines()
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if line.startswith("| ")]
    engines = rows[0][1:]
    assert engines == ["torch", "ensemble", "onnxruntime", "ctranslate2"]
    for feature, (flag, _) in FEATURES.items():
        found = [row for row in rows if f"`{flag}`" in row[0]]
        assert len(found) == 1, f"no row of {flag}"
        said = {engine: cell.split()[0] for engine, cell in zip(engines, found[0][1:], strict=True)}
        assert said == {engine: "yes" if getattr(CAPABILITIES[engine], feature) else "no" for engine in engines}, flag


def test_an_unwritable_output_is_refused_before_the_model_loads(model: Path, tmp_path: Path, capsys) -> None:
    """``--output`` a directory (or under a file, or an input) is named before anything loads or is searched, not
    after the whole input was translated; a folder still to be made is fine (the write makes it)."""
    (tmp_path / "file").write_text("")
    for output, reason in ((tmp_path, "a directory, not a file to write"),
                           (tmp_path / "file" / "out.txt", "cannot write (Not a directory)")):  # fmt: skip
        argv = ["translate", "--model", str(tmp_path / "no-model"), "--output", str(output)]
        assert main(argv) == 2
        assert capsys.readouterr().err == f"error: {output}: {reason}\n"
    for flag in ("--input", "--prefix", "--constraints"):  # the input was replaced by its translation
        argv = ["translate", "--model", str(tmp_path / "no-model"), flag, str(tmp_path / "file"), "--output",
                str(tmp_path / "file")]  # fmt: skip
        assert main(argv) == 2
        assert "file: the same file as the input" in capsys.readouterr().err
    argv = translate(model, tmp_path, "--beam", "1")
    argv[argv.index("--output") + 1] = str(tmp_path / "new" / "folder" / "out.txt")
    assert main(argv) == 0
    assert (tmp_path / "new" / "folder" / "out.txt").read_text(encoding="utf-8").count("\n") == 1


def test_a_terminated_translation_says_that_nothing_was_written(model: Path, tmp_path: Path) -> None:
    """SIGTERM while translate waits for its input (a FIFO: once the test's open returns, translate has opened it,
    past loading the model): one line on stderr, no traceback, the process ended by the signal, no output file."""
    fifo, output = tmp_path / "in.fifo", tmp_path / "out.txt"
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "adlnmt", "translate", "--model", str(model), "--input", str(fifo), "--output",
            str(output)]  # fmt: skip
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) as process, fifo.open("w") as writer:
        writer.write("ein Hund\n")
        writer.flush()
        process.send_signal(signal.SIGTERM)
        stderr = process.communicate()[1]
    assert process.returncode == -signal.SIGTERM, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"SIGTERM: translation stopped; nothing written ({output} gets every line once all are translated)"
    )
    assert "Traceback" not in stderr and not output.exists()


def test_an_output_limit_of_zero_tokens_is_refused(model: Path, tmp_path: Path, capsys) -> None:
    """``--max-len-ratio 0 --max-len-extra 0`` made every output empty without a word."""
    assert main(translate(model, tmp_path, "--max-len-ratio", "0", "--max-len-extra", "0")) == 2
    assert capsys.readouterr().err.startswith("error: --max-len-ratio 0 --max-len-extra 0: every output would be empty")
    assert not (tmp_path / "out.txt").exists()
    assert main(translate(model, tmp_path, "--max-len-ratio", "0", "--max-len-extra", "2")) == 0  # a cap, as before


@pytest.mark.parametrize("flag", ["--prefix", "--constraints"])
def test_a_prefix_or_constraints_file_of_dash_is_not_called_missing(flag: str, model: Path, tmp_path: Path,
                                                                     capsys) -> None:  # fmt: skip
    """``--prefix -`` (standard input, as for --input) said '-: file not found'."""
    assert main(translate(model, tmp_path, flag, "-")) == 2
    assert capsys.readouterr().err.startswith(f"error: {flag} -: {flag} reads a file, not standard input")
    assert not (tmp_path / "out.txt").exists()
