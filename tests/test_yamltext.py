"""The one YAML reader: what PyYAML refuses and a key given twice become one UserError naming the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.yamltext import read_yaml_file


def written(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "file.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nname: y\n", r"file.yaml:2: duplicate key 'name' \(first given at line 1"),
        ("translate:\n  beam: 2\n  batch_size: 8\n  beam: 7\n", r"file.yaml:4: duplicate key 'beam' \(first given at "
         r"line 2; YAML would keep only the last\)"),
        ("variants:\n  - {name: a, preset: b, name: c}\n", r"file.yaml:2: duplicate key 'name'"),
        ("a: [1, 2\n", r"file.yaml:2: invalid YAML"),
        (b"name: \xff\n", r"file.yaml: invalid UTF-8"),
    ],
)  # fmt: skip
def test_bad_yaml_is_one_error_naming_the_file_and_line(tmp_path: Path, text: str | bytes, message: str) -> None:
    with pytest.raises(UserError, match=message):
        read_yaml_file(written(tmp_path, text))


def test_keys_a_merge_brings_in_may_be_given_again(tmp_path: Path) -> None:
    text = "defaults: &d {beam: 2, batch_size: 8}\ntranslate:\n  <<: *d\n  beam: 7\n"
    assert read_yaml_file(written(tmp_path, text))["translate"] == {"beam": 7, "batch_size": 8}
    assert read_yaml_file(written(tmp_path, "")) is None
    assert read_yaml_file(written(tmp_path, "a: {1: x, '1': y}\n")) == {"a": {1: "x", "1": "y"}}  # other keys


def test_a_grid_file_and_a_training_config_refuse_a_key_given_twice(tmp_path: Path, capsys) -> None:
    grid = written(tmp_path, "name: x\nseeds: [1]\nname: y\n")
    assert main(["experiment", str(grid), "--dry-run"]) == 2
    assert f"{grid}:3: duplicate key 'name'" in capsys.readouterr().err
    config = written(tmp_path, "lr: 1.0e-3\nlr: 2.0e-3\n")
    assert main(["train", "--config", str(config), "--data", "x", "--model", str(tmp_path / "m")]) == 2
    assert f"{config}:2: duplicate key 'lr'" in capsys.readouterr().err
