"""Training options: defaults < YAML < CLI flags; bad values and files are clear errors."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from adlnmt.errors import UserError
from adlnmt.train.config import add_arguments, build_config, from_arguments


def parse(argv: list[str]):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_arguments(parser.parse_args(argv))


def test_defaults_follow_the_adl_paper() -> None:
    config = parse(["--data", "d", "--model", "m"])
    assert (config.lr, config.lr_decay, config.lr_patience, config.label_smoothing) == (2e-4, 0.7, 8, 0.1)
    assert config.lr_schedule == "plateau" and config.d_ff == 4 * config.d_model


def test_init_reaches_the_model_config() -> None:
    assert parse(["--data", "d", "--model", "m", "--preset", "transformer"]).model_config(8, 8).init == "torch"
    config = parse(["--data", "d", "--model", "m", "--preset", "transformer", "--init", "fairseq"])
    assert config.model_config(8, 8).init == "fairseq"


def test_cli_flags_override_yaml(tmp_path: Path) -> None:
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("data: d\nmodel: m\nd-model: 64\nheads: 2\nvar:\n  X: 3\nvalid_bleu: false\n")
    config = parse(["--config", str(yaml_file), "--heads", "4"])
    assert (config.d_model, config.heads, config.var, config.valid_bleu) == (64, 4, ["X=3"], False)


@pytest.mark.parametrize(
    ("yaml_text", "argv", "message"),
    [
        (
            "d-ff: 100\nd-model: 64\n",
            [],
            r"--d-ff \(100\) must be a multiple of --d-model \(64\) for ffl \("
            r"--d-ff, --d-model: set in {config}\)$",
        ),
        ("d-ff: 100\n", ["--d-model", "64"], r"for ffl \(--d-ff: set in {config}\)$"),
        ("valid_bleu: false\n", ["--early-stop-metric", "bleu"], r"switches off \(--valid-bleu: set in {config}\)$"),
        ("d-ff: 128\n", ["--d-model", "48"], r"for ffl \(--d-ff: set in {config}\)$"),
    ],
    ids=["both from the file", "one from the file", "a switch off in the file", "the file's value, a flag's other"],
)
def test_an_error_about_options_from_the_config_file_says_so(
    tmp_path: Path, yaml_text: str, argv: list[str], message: str
) -> None:
    """The checks across options name them as flags; where the YAML file set one, the error says which and where."""
    config = tmp_path / "c.yaml"
    config.write_text("data: d\nmodel: m\nearly_stop_metric: ppl\n" + yaml_text)
    with pytest.raises(UserError, match=message.format(config=re.escape(str(config)))):
        parse(["--config", str(config), *argv])
    with pytest.raises(UserError, match=r"for ffl$"):  # the same options as flags: no file to name
        parse(["--data", "d", "--model", "m", "--d-ff", "100", "--d-model", "64"])


def test_a_second_config_file_is_refused(tmp_path: Path, capsys) -> None:
    """--config a.yaml --config b.yaml trained with b.yaml's options alone: a.yaml's were dropped in silence."""
    (tmp_path / "a.yaml").write_text("lr: 1e-3\n")
    (tmp_path / "b.yaml").write_text("seed: 3\n")
    with pytest.raises(SystemExit):
        parse(["--config", str(tmp_path / "a.yaml"), "--config", str(tmp_path / "b.yaml")])
    assert f"argument --config: given twice ('{tmp_path / 'a.yaml'}', then '{tmp_path / 'b.yaml'}')" in (
        capsys.readouterr().err
    )


def test_yaml_numbers_without_a_dot_are_numbers(tmp_path: Path) -> None:
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("data: d\nmodel: m\nlr: 1e-3\nadam_eps: 1e-9\nlr_decay: 1\n")  # YAML: '1e-3' is a string
    config = parse(["--config", str(yaml_file)])
    assert (config.lr, config.adam_eps, config.lr_decay) == (1e-3, 1e-9, 1.0)
    assert isinstance(config.lr, float)


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("data: d\nmodel: a: b\n", "c.yaml:2"),
        ("nonsense_option: 1\n", "unknown option 'nonsense_option'"),
        ("- 1\n", "mapping"),
        ("lr: fast\n", "option 'lr' expects a number, got 'fast'"),
        # two spellings of one option: YAML keeps both keys, and one value would silently win
        ("d_model: 32\nd-model: 64\n", "c.yaml: 'd-model' and 'd_model' are one option, given twice"),
    ],
)
def test_bad_yaml_is_a_located_error(tmp_path: Path, yaml_text: str, message: str) -> None:
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text(yaml_text)
    with pytest.raises(UserError, match=message):
        parse(["--config", str(yaml_file)])


def test_bad_values_are_errors() -> None:
    with pytest.raises(UserError, match="multiple of --d-model"):
        parse(["--data", "d", "--model", "m", "--d-model", "64", "--d-ff", "100"])
    with pytest.raises(UserError, match="--batch-tokens must be >= 1"):
        build_config({"data": "d", "model": "m", "batch_tokens": 0})  # as from YAML or a grid; a flag: argparse


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ('tie_output: "false"\nvalid_bleu: "FALSE"\n', (False, False)),
        ("tie_output: 'True'\nvalid_bleu: true\n", (True, True)),
    ],
)
def test_quoted_yaml_booleans_are_parsed(tmp_path: Path, yaml_text: str, expected: tuple[bool, bool]) -> None:
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("data: d\nmodel: m\n" + yaml_text)
    config = parse(["--config", str(yaml_file)])
    assert (config.tie_output, config.valid_bleu) == expected


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("lr: [1, 2]\n", "c.yaml: option 'lr' expects a number, got [1, 2]"),
        ("var: 7\n", "c.yaml: option 'var' expects a mapping NAME: VALUE or a list of NAME=VALUE, got 7"),
        (  # the mapping's value went into the ADL as "{'b': 1}", an error naming --var, not the file
            "var: {A: {b: 1}}\n",
            "c.yaml: option 'var' expects a mapping NAME: VALUE or a list of NAME=VALUE, got {'A': {'b': 1}}",
        ),
        ("preset: [x]\n", "c.yaml: option 'preset' expects a text value, got ['x']"),
        (  # as docs/training.md writes --tensorboard off: YAML reads it as false
            "tensorboard: off\n",
            "c.yaml: option 'tensorboard' expects a text value, got False (YAML reads an unquoted off/no/false as "
            "false: quote it, e.g. 'off')",
        ),
        ("tie_output: maybe\n", "c.yaml: option 'tie_output' expects true or false, got 'maybe'"),
        ("heads: 2.5\n", "c.yaml: option 'heads' expects an integer, got 2.5"),
        ("lr_schedule: cosine\n", "c.yaml: option 'lr_schedule' expects one of plateau, inverse-sqrt, got 'cosine'"),
        ("lr: " + "[" * 5000 + "]" * 5000 + "\n", "c.yaml: invalid YAML: nested too deeply"),
        # an empty folder name trained without the pretrained weights, TensorBoard or the data/model it named
        ("init_from: ''\n", "c.yaml: option 'init_from': an empty path (an unset shell variable?)"),
        ("tensorboard: ''\n", "c.yaml: option 'tensorboard': an empty path (an unset shell variable?)"),
        ("data: ' '\n", "c.yaml: option 'data': an empty path (an unset shell variable?)"),
    ],
)
def test_wrongly_typed_yaml_values_are_located_errors(tmp_path: Path, yaml_text: str, message: str) -> None:
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text(yaml_text)
    with pytest.raises(UserError) as info:
        parse(["--config", str(yaml_file)])
    assert str(info.value) == f"{yaml_file.parent}/{message}"


def test_stopping_on_bleu_without_validation_bleu_is_an_error() -> None:
    """It would otherwise stop on perplexity without saying so."""
    with pytest.raises(UserError, match="--early-stop-metric bleu needs the validation BLEU that --no-valid-bleu"):
        parse(["--data", "d", "--model", "m", "--early-stop-metric", "bleu", "--no-valid-bleu"])
    assert parse(["--data", "d", "--model", "m", "--early-stop-metric", "bleu"]).early_stop_metric == "bleu"


def test_a_variable_given_twice_is_an_error() -> None:
    """``--var N=2 --var N=3`` built the model with N=3 without a word about the 2 (also with ``$N`` written once as
    ``N`` and once as ``$N``); each variable is now given once."""
    encoder = "pos -> repeat($N, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
    decoder = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"
    base = ["--data", "d", "--model", "m", "--encoder", encoder, "--decoder", decoder]
    for second in ("N=3", "$N=3", "N=2"):
        with pytest.raises(UserError, match=rf"^--var N given twice \(N=2, then {re.escape(second)}\); give each"):
            parse([*base, "--var", "N=2", "--var", second]).model_config(8, 8)
    with pytest.raises(UserError, match=r"--var FF_NUM_HIDDEN given twice"):
        parse([*base, "--var", "N=2", "--var", "FF_NUM_HIDDEN=8", "--var", "FF_NUM_HIDDEN=16"]).model_config(8, 8)


def test_a_variable_the_architecture_does_not_use_is_an_error() -> None:
    """``--var NAME=VALUE`` for a $NAME neither chain has (a typo, or a variable of another architecture) was
    ignored without a word; $FF_NUM_HIDDEN and $NUM_HIDDEN, which every model defines, stay allowed."""
    encoder = "pos -> repeat($N, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
    decoder = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"
    base = ["--data", "d", "--model", "m", "--encoder", encoder, "--decoder", decoder, "--var", "N=2"]
    assert parse([*base, "--var", "FF_NUM_HIDDEN=64"]).model_config(8, 8).variables["N"] == "2"
    with pytest.raises(UserError, match=r"--var NN=3: the architecture uses no \$NN \(its variables: \$N\)"):
        parse([*base, "--var", "NN=3"]).model_config(8, 8)
    with pytest.raises(UserError, match=r"uses no \$DROPOUT \(its variables: none\)"):
        parse(["--data", "d", "--model", "m", "--preset", "transformer", "--var", "DROPOUT=0.3"]).model_config(8, 8)


def test_a_directory_as_config_is_named_as_one(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        parse(["--config", str(tmp_path)])
    assert str(info.value) == f"{tmp_path}: a directory, not a config file (a YAML file of option: value)"


def test_the_plateau_schedules_help_names_the_score_it_follows() -> None:
    """The help said the plateau schedule decays "when validation perplexity stalls"; with --early-stop-metric bleu
    it follows validation BLEU (Trainer.checkpoint's improvement)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert "--early-stop-metric stalls" in " ".join(parser.format_help().split())
