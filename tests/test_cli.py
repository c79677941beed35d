"""The command line: describe every published string; bad input exits 2 with one clear message."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from adlnmt.cli import COMMAND_GROUPS, build_parser, main
from adlnmt.published import DECODERS, ENCODERS

VARS = ["--var", "FF_NUM_HIDDEN=2048", "--var", "NUM_HIDDEN=512"]
PAIRS = [(e, "D1") for e in ENCODERS] + [("E1", d) for d in DECODERS]


@pytest.mark.parametrize(("enc", "dec"), PAIRS)
def test_describe_every_published_string(enc: str, dec: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "--encoder", ENCODERS[enc], "--decoder", DECODERS[dec], *VARS]) == 0
    out = capsys.readouterr().out
    assert out.startswith("encoder: ") and "\ndecoder: " in out
    assert "total" in out and "repeat(" in out


def test_describe_counts_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    main(
        [
            "describe",
            "--d-model",
            "8",
            "--heads",
            "2",
            "--src-vocab",
            "10",
            "--tgt-vocab",
            "10",
            "--encoder",
            "linear",
            "--decoder",
            "res(dot_src_att) -> ff(4)",
        ]
    )
    out = capsys.readouterr().out
    # embeddings 2·80, encoder 72, decoder: q,k,v,o projections 4·72, ff 36, output 4·10+10
    assert "total" in out and f"{2 * 80 + 72 + 4 * 72 + 36 + 50:,}" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["describe", "--encoder", "pos -> nrom", "--decoder", DECODERS["D1"], *VARS],
        ["describe", "--encoder", "pos -> ff($WIDTH)", "--decoder", DECODERS["D1"]],  # $WIDTH undefined
        ["describe", "--encoder", "pos", "--decoder", "pos -> birnn -> res(mh_dot_att)"],
        ["describe", "--encoder", "pos", "--decoder", "res(mh_dot_att)", "--var", "oops"],
        ["describe", "--encoder", "pos", "--decoder", "res(mh_dot_att)", "--d-model", "0"],
    ],
)
def test_bad_input_exits_2_with_one_message(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(("ADL error", "error: ")) and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["score", "--hyp", "h", "--ref", "r", "--bootstrap", ""], "--bootstrap"),  # scored without the bootstrap
        (["score-pairs", "--model", "m", "--source", "s", "--target", "t", "--output", ""], "--output"),  # stdout
        (["contrastive", "--model", "m", "--suite", "s", "--json", " "], "--json"),  # no JSON written
        (["contrastive-suite", "demo", "--output", ""], "--output"),  # a traceback (Path('.') has an empty name)
        (["contrastive-suite", "demo", "--reference", "", "--output", "o"], "--reference"),  # the demo's own targets
        (["contrastive-suite", "demo", "--reference", "r", "--source", "", "--output", "o"], "--source"),  # sources ""
        (["translate", "--model", "m", "--input", ""], "--input"),  # stdin
        (["translate", "--model", "m", "--prefix", ""], "--prefix"),  # no prefixes
        (["translate", "--model", "m", "--constraints", ""], "--constraints"),  # no constraints
        (["translate", "--model", "m", "--shortlist", ""], "--shortlist"),  # named the working folder
        (["average", "--model", "m", "--last", "1", "--output", ""], "--output"),  # replaced MODEL/averaged.safetensors
        (["plot", "m", "--out", ""], "--out"),  # named the working folder
        (["plot", ""], "MODEL"),  # the working folder as a model
        (["shortlist", "--data", "d", "--out", ""], "--out"),  # named the working folder
        (["distill", "--data", "", "--out", "o", "--model", "m"], "--data"),  # the working folder as the data
        # --model '' and --checkpoint '': the working folder as the model ('.: not a model directory'), or ignored
        (["translate", "--model", ""], "--model"),
        (["translate", "--model", "m", "--checkpoint", ""], "--checkpoint"),
        (["distill", "--data", "d", "--out", "o", "--model", "m", "--checkpoint", ""], "--checkpoint"),
        (["score-pairs", "--model", "", "--source", "s", "--target", "t"], "--model"),
        (["score-pairs", "--model", "m", "--checkpoint", "", "--source", "s", "--target", "t"], "--checkpoint"),
        (["contrastive", "--model", "", "--suite", "s"], "--model"),
        (["contrastive", "--model", "m", "--checkpoint", " ", "--suite", "s"], "--checkpoint"),
        (["average", "--model", "", "--last", "1"], "--model"),
        (["export", "--model", "", "--format", "onnx", "--out", "o"], "--model"),
        (["export", "--model", "m", "--checkpoint", "", "--format", "onnx", "--out", "o"], "--checkpoint"),
        (["serve", "--model", ""], "--model"),
        (["serve", "--model", "m", "--checkpoint", ""], "--checkpoint"),
        (["publish", "", "--out", "o"], "MODEL"),
        (["publish", "m", "--checkpoint", "", "--out", "o"], "--checkpoint"),
        (["bench", "decode", "--model", "", "--input", "i"], "--model"),
        (["bench", "decode", "--model", "m", "--checkpoint", "", "--input", "i"], "--checkpoint"),
        (["train", "--data", "d", "--model", ""], "--model"),  # 'train needs --data DIR and --model DIR'
        (["train", "--data", "", "--model", "m"], "--data"),
        (["import", "", "--from", "hf-marian", "--out", "o"], "DIR"),  # the working folder as the MarianMT model
        (["import", "hf", "--from", "hf-marian", "--out", ""], "--out"),  # named the working folder ('.: exists')
        (["import", "hf", "--from", "hf-marian", "--out", "o", "--diagram", ""], "--diagram"),  # no diagram drawn
        (["export", "--model", "m", "--format", "onnx", "--out", ""], "--out"),  # named the working folder
        (["publish", "m", "--out", ""], "--out"),  # named the working folder
        (["bench", "decode", "--preset", "transformer", "--out", ""], "--out"),  # the results in the working folder
        (["bench", "decode", "--model", "m", "", "--input", "i"], "--model"),  # the working folder as a model
        (["bench", "decode", "--model", "m", "--input", ""], "--input"),  # 'needs --input FILE'
        (["bench", "train", "--preset", "transformer", "--data", ""], "--data"),  # random pairs instead of the data
        (["train", "--config", "", "--data", "d", "--model", "m"], "--config"),  # trained without the YAML file
        (["train", "--data", "d", "--model", "m", "--init-from", ""], "--init-from"),  # random weights, no word
        (["train", "--data", "d", "--model", "m", "--tensorboard", ""], "--tensorboard"),  # no events written
    ],
)
def test_an_empty_path_is_refused_not_read_as_the_flag_left_out(argv: list[str], flag: str, capsys) -> None:
    """An empty file name (an unset shell variable) once meant stdin/stdout, no such file, or a traceback."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert f"error: argument {flag}: an empty path (an unset shell variable?)" in capsys.readouterr().err


@pytest.mark.parametrize("output", ["config.json", "best.safetensors", "checkpoints/update-0000040.safetensors",
                                    "vocab/spm.model", "other.safetensors"])  # fmt: skip
@pytest.mark.parametrize("command", ["translate", "score-pairs", "contrastive", "contrastive --json"])
def test_an_output_never_replaces_a_file_of_the_model(tmp_path, output: str, command: str, capsys) -> None:
    """--output (or --json) naming the model's config, weights, a checkpoint, its vocabulary or the --checkpoint
    file was written over it: the model directory was destroyed. Checked before the model loads."""
    model = tmp_path / "model"
    for name in ("config.json", "best.safetensors", "checkpoints/update-0000040.safetensors", "vocab/spm.model"):
        (model / name).parent.mkdir(parents=True, exist_ok=True)
        (model / name).write_text(name)
    (tmp_path / "other.safetensors").write_text("weights")
    target = tmp_path / output if output == "other.safetensors" else model / output
    (tmp_path / "text").write_text("a b\n")
    (tmp_path / "suite").write_text("{}\n")
    argv = {"translate": ["translate", "--input", str(tmp_path / "text"), "--output"],
            "score-pairs": ["score-pairs", "--source", str(tmp_path / "text"), "--target", str(tmp_path / "text"),
                            "--output"],
            "contrastive": ["contrastive", "--suite", str(tmp_path / "suite"), "--output"],
            "contrastive --json": ["contrastive", "--suite", str(tmp_path / "suite"), "--json"]}[command]  # fmt: skip
    before = target.read_bytes()
    checkpoint = ["--checkpoint", str(tmp_path / "other.safetensors")] if output == "other.safetensors" else []
    assert main([*argv, str(target), "--model", str(model), *checkpoint]) == 2
    assert f"{target}: the same file as the input {target}" in capsys.readouterr().err
    assert target.read_bytes() == before


def test_console_script_runs_without_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "adlnmt.cli", "describe", "--encoder", "pos -> (", "--decoder", "x"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "^" in result.stderr


def test_layers_lists_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["layers"]) == 0
    out = capsys.readouterr().out
    for name in ("mh_dot_self_att", "comet_conv", "aan", "birnn", "highway", "bnorm"):
        assert name in out


def subcommands(parser: argparse.ArgumentParser) -> list[str]:
    """The command names a parser accepts, in order."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def test_command_groups_name_exactly_what_each_group_adds() -> None:
    """COMMAND_GROUPS (which lets a named command build its group alone) lists each group's commands as it adds them,
    and the whole parser has them all in that order."""
    everything = [name for _, _, names in COMMAND_GROUPS for name in names]
    assert subcommands(build_parser()) == everything
    for _, _, names in COMMAND_GROUPS:
        for name in names:
            assert subcommands(build_parser(name)) == list(names)
    assert subcommands(build_parser("--help")) == everything


def test_a_named_command_parses_as_in_the_whole_parser() -> None:
    """The group-only parser gives a command line the same namespace as the full one."""
    argv = ["translate", "--model", "m", "--beam", "3", "--engine", "ctranslate2"]
    assert vars(build_parser("translate").parse_args(argv)) == vars(build_parser().parse_args(argv))


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["layers", "--bogus"], "adlnmt layers"),
        (["translate", "--model", "m", "--bogus"], "adlnmt translate"),
        (["bench", "decode", "--bogus"], "adlnmt bench decode"),
    ],
)
def test_an_unknown_argument_is_refused_by_its_command(argv: list[str], command: str, capsys) -> None:
    """argparse leaves unknown arguments to the top parser, built for the command's group alone: `adlnmt layers
    --bogus` showed the usage `adlnmt [-h] {describe,layers,architectures}`."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith(f"usage: {command} [-h]")
    assert err.endswith(f"{command}: error: unrecognized arguments: --bogus\n")


@pytest.mark.parametrize(
    ("argv", "command", "said"),
    [
        (["translate", "--modle", "m"], "adlnmt translate", "--modle (did you mean --model?)"),
        (["translate", "--modle=m", "--beem", "3"], "adlnmt translate",
         "--modle=m (did you mean --model?) --beem (did you mean --beam?)"),
        (["bench", "decode", "--preste", "x"], "adlnmt bench decode", "--preste (did you mean --preset?)"),
        (["bench", "--bogus", "decode"], "adlnmt bench", "--bogus"),
        (["layers", "--lyers"], "adlnmt layers", "--lyers"),
    ],
)  # fmt: skip
def test_an_unknown_flag_is_refused_first_with_a_close_flag(argv: list[str], command: str, said: str, capsys) -> None:
    """A misspelt flag is reported by the (sub)command it follows, before a required flag it hides: `adlnmt
    translate --modle m` said `the following arguments are required: --model`."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith(f"usage: {command} [-h]")
    assert err.endswith(f"{command}: error: unrecognized arguments: {said}\n")


@pytest.mark.parametrize(
    ("argv", "command"),
    [(["translate", "--modle", "m", "-h"], "translate"), (["bench", "--bogus", "decode", "--help"], "bench decode")],
)
def test_a_help_flag_wins_over_an_unknown_flag(argv: list[str], command: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0 and capsys.readouterr().out.startswith(f"usage: adlnmt {command} [-h]")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["translate", "--mode", "m", "--beam"], "argument --beam: expected one argument"),
        (["translate", "--model=m", "--length-penalty", "-0.5"], "argument --length-penalty: must be >= 0, got -0.5"),
    ],
)
def test_an_abbreviated_flag_or_a_negative_number_is_no_unknown_flag(argv: list[str], said: str, capsys) -> None:
    """``--mode`` is argparse's abbreviation of ``--model``, ``-0.5`` a value: argparse's own errors remain."""
    with pytest.raises(SystemExit):
        main(argv)
    assert capsys.readouterr().err.endswith(f"adlnmt translate: error: {said}\n")


def test_an_os_error_without_a_file_name_shows_no_empty_name(capsys) -> None:
    import errno

    from adlnmt.exits import exit_status

    def fail() -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    assert exit_status(fail) == 2
    assert capsys.readouterr().err == "error: No space left on device\n"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("translate", "interrupted\n"),  # its output is written at the end: nothing resumes
        ("score-pairs", "interrupted\n"),
        (None, "interrupted\n"),
        ("train", "interrupted (the same command resumes training from its last checkpoint)\n"),
        ("distill", "interrupted (the same command resumes from its last chunk)\n"),
    ],
)
def test_ctrl_c_says_how_the_command_resumes_only_when_it_does(name: str | None, said: str, capsys) -> None:
    """Ctrl-C on translate said 'the same command resumes training from its last checkpoint, prepare from ...':
    a command that does not resume says only that it was interrupted."""
    from adlnmt.exits import exit_status

    def interrupted() -> int:
        raise KeyboardInterrupt

    assert exit_status(interrupted, name) == 130
    assert capsys.readouterr().err == said
