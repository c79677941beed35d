"""Checkpoint files: atomic replacement, safetensors weights, pickle-free state loading."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from adlnmt.errors import UserError
from adlnmt.store import ModelDir, load_weights
from adlnmt.store.atomic import atomic_write
from adlnmt.train import checkpoint as ckpt


def test_atomic_write_keeps_the_old_file_when_the_writer_dies(tmp_path: Path) -> None:
    target = tmp_path / "state.pt"
    ckpt.save_state({"update": torch.tensor(1)}, target)

    def dies(tmp: Path) -> None:
        tmp.write_bytes(b"half a checkp")
        raise KeyboardInterrupt  # as if killed mid-write

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, dies)
    assert ckpt.load_state(target)["update"].item() == 1
    assert [p.name for p in tmp_path.iterdir()] == ["state.pt"]  # no temporary file left behind


def test_weights_round_trip_with_tied_parameters(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5))
    model[1].weight = model[0].weight
    ckpt.save_weights(model, tmp_path / "w.safetensors", "m")
    other = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5))
    other[1].weight = other[0].weight
    load_weights(other, tmp_path / "w.safetensors")
    assert torch.equal(other[0].weight, model[0].weight) and torch.equal(other[1].bias, model[1].bias)


def test_mismatched_or_damaged_weights_are_clear_errors(tmp_path: Path) -> None:
    ckpt.save_weights(torch.nn.Linear(3, 5), tmp_path / "w.safetensors", "m")
    with pytest.raises(UserError, match="does not match the model"):
        load_weights(torch.nn.Sequential(torch.nn.Linear(3, 5)), tmp_path / "w.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"garbage")
    with pytest.raises(UserError, match="not a readable safetensors"):
        load_weights(torch.nn.Linear(3, 5), tmp_path / "bad.safetensors")


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_state_loading_never_unpickles_code(tmp_path: Path) -> None:
    path = tmp_path / "state.pt"
    torch.save({"x": Evil()}, path, pickle_module=pickle)
    with pytest.raises(UserError, match="cannot read the training state"):
        ckpt.load_state(path)


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    for update in (100, 200, 300, 400):
        path = ModelDir(tmp_path).weights_path(update)
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"")
    ckpt.prune(tmp_path, 2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "update-0000300.safetensors",
        "update-0000400.safetensors",
    ]


def test_prune_also_keeps_the_best_by_score(tmp_path: Path) -> None:
    for update in (100, 200, 300, 400, 500):
        path = ModelDir(tmp_path).weights_path(update)
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"")
    ckpt.prune(tmp_path, 1, 2, {100: -3.0, 200: -1.0, 300: -2.0, 400: -5.0, 500: -4.0})
    assert sorted(int(p.stem.split("-")[1]) for p in (tmp_path / "checkpoints").iterdir()) == [200, 300, 500]


def test_saved_states_are_found_newest_first_and_weights_are_not_states(tmp_path: Path) -> None:
    files = ModelDir(tmp_path)
    for update in (90, 100, 200):
        for path in (files.weights_path(update), files.state_path(update)):
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(b"")
    files.weights_path(300).write_bytes(b"")  # weights without a state: nothing to resume from
    assert [update for update, _ in files.states()] == [90, 100, 200]
    assert ckpt.saved_states(tmp_path) == [files.state_path(200), files.state_path(100), files.state_path(90)]


def two_layers(tie: bool = False) -> nn.Sequential:
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 3, bias=False))
    if tie:
        model[1].weight = nn.Parameter(model[0].weight.T.contiguous())
        model[0].weight = nn.Parameter(torch.randn(4, 3))
        model.append(nn.Linear(4, 3, bias=False))
        model[2].weight = model[1].weight
    return model


def test_weights_that_are_views_into_one_buffer_are_saved(tmp_path: Path) -> None:
    """cuDNN packs an RNN's weights into one buffer on CUDA (each parameter a view of it), emulated on the CPU here;
    tied weights are still stored once, as safetensors' save_model stores them, so that load_model reads the file."""
    packed = two_layers()
    buffer = torch.randn(40)
    with torch.no_grad():
        packed[0].weight.set_(buffer.untyped_storage(), 0, (4, 3))
        packed[0].bias.set_(buffer.untyped_storage(), 12, (4,))
    tied = two_layers(tie=True)
    for model, fresh, stored in ((packed, two_layers(), 3), (tied, two_layers(tie=True), 3)):
        path = tmp_path / "w.safetensors"
        ckpt.save_weights(model, path, "m")
        assert len(load_file(path)) == stored  # the tied weight once
        load_weights(fresh, path)
        for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values(), strict=True):
            assert torch.equal(a, b), name
