"""Every registered layer keeps the layer contract on every side it allows, built from its spec's example
(so a new layer is checked without a test of its own); the layer table of the docs (docs/adl.md) is the registry's."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from torch import nn

import adlnmt.layers  # noqa: F401  (registers every layer)
from adlnmt.adl.registry import REGISTRY, Side, layer_table
from adlnmt.layers.builder import uses_cudnn
from layer_contract import check_contract

ADL_PAGE = Path(__file__).parents[2] / "docs" / "adl.md"
CASES = [
    pytest.param(spec.name, side, id=f"{spec.name}-{side.value}")
    for spec in REGISTRY.values()
    for side in Side
    if side in spec.sides
]


@pytest.mark.parametrize(("name", "side"), CASES)
def test_every_registered_layer_keeps_the_contract(name: str, side: Side) -> None:
    spec = REGISTRY[name]
    setup = check_contract(spec.example, side)
    assert any(type(m) is spec.cls for m in setup.layer.modules()), f"the example {spec.example!r} has no {name}"


def documented_table() -> str:
    """The table under the "### Layers" heading of docs/adl.md."""
    lines = ADL_PAGE.read_text(encoding="utf-8").split("\n### Layers\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return "\n".join(lines[start:end]) + "\n"


def test_the_documented_layer_table_is_generated_from_the_registry() -> None:
    actual, expected = documented_table(), layer_table()
    diff = "".join(difflib.unified_diff(actual.splitlines(True), expected.splitlines(True), "docs/adl.md", "registry"))
    assert actual == expected, (
        "the layer table of docs/adl.md differs from the registry; replace it with the output of "
        "`python -c 'import adlnmt.layers; from adlnmt.adl.registry import layer_table; print(layer_table())'`:\n"
        + diff
    )


CUDNN_MODULES = (nn.modules.conv._ConvNd, nn.RNNBase)  # the modules PyTorch runs with cuDNN on a GPU


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_layer_says_whether_it_computes_with_cudnn(name: str) -> None:
    """``Layer.cudnn`` (which decides whether a GPU run without TF32 switched off is IEEE fp32) matches the modules
    each registered layer's example really builds, nested chains included."""
    spec = REGISTRY[name]
    side = Side.ENCODER if Side.ENCODER in spec.sides else Side.DECODER
    built = check_contract(spec.example, side).layer
    assert uses_cudnn(spec.example) == any(isinstance(m, CUDNN_MODULES) for m in built.modules())
