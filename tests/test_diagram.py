"""Architecture diagrams: every preset and published string draws; frames, bypasses and source arrows
match the ADL; missing Graphviz is one clear error. Structure is checked in the SVG, never pixels."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from adlnmt.adl.parser import parse
from adlnmt.adl.registry import ALIASES, REGISTRY
from adlnmt.adl.syntax import Chain, LayerNode, Literal
from adlnmt.cli import main
from adlnmt.diagram import diagram_svg, model_dir_svg, model_graph, model_svg
from adlnmt.errors import UserError
from adlnmt.layers.builder import ModelOptions
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.presets import PRESETS
from adlnmt.published import DECODERS, ENCODERS, as_run
from adlnmt.train.config import build_config

SVG = "{http://www.w3.org/2000/svg}"
TINY = {"d_model": 16, "heads": 4, "d_ff": 32}
RESIDUALS = {"res", "res_d", "res_nd", "highway"}
needs_graphviz = pytest.mark.skipif(
    shutil.which("dot") is None or importlib.util.find_spec("graphviz") is None,
    reason="Graphviz is not installed: its `dot` program (apt-get install graphviz; `make install` does it as root) "
    "or the Python package (pip install 'adlnmt[diagram]')",
)


def preset_model(name: str, **options: object) -> Seq2Seq:
    with torch.device("meta"):
        return Seq2Seq(build_config({"preset": name, **TINY, **options}).model_config(40, 40))


def layer_nodes(chain: Chain) -> Iterator[LayerNode]:
    """Every layer of an ADL tree, nested chains and bare layer names given as arguments included."""
    for node in chain.layers:
        yield node
        for arg in node.args:
            if isinstance(arg.value, Chain):
                yield from layer_nodes(arg.value)
            elif isinstance(arg.value, Literal) and arg.value.kind == "word" and arg.key is None:
                yield LayerNode(str(arg.value.value))


def canonical_names(*texts: str) -> list[str]:
    return [ALIASES.get(node.name, node.name) for text in texts for node in layer_nodes(parse(text))]


def groups(svg: str, kind: str) -> list[ET.Element]:
    """The SVG groups (nodes, edges, frames) that the diagram gave ids of this kind."""
    root = ET.fromstring(svg)
    return [g for g in root.iter(f"{SVG}g") if g.get("id", "").rstrip("0123456789") == kind]


def texts(element: ET.Element) -> list[str]:
    return [t.text or "" for t in element.iter(f"{SVG}text")]


def edge_ends(edge: ET.Element) -> tuple[str, str]:
    tail, head = edge.find(f"{SVG}title").text.split("->")
    return tail, head


def check_structure(model: Seq2Seq, encoder: str, decoder: str) -> None:
    svg = model_svg(model)
    names = canonical_names(encoder, decoder)
    repeats = [node for text in (encoder, decoder) for node in layer_nodes(parse(text)) if node.name == "repeat"]
    frames = groups(svg, "repeat")
    assert sorted(t for frame in frames for t in texts(frame)) == sorted(f"×{n.args[0].value.value}" for n in repeats)
    assert len(groups(svg, "bypass")) == sum(name in RESIDUALS for name in names)
    attentions = sum(REGISTRY[name].source_attention for name in names if name in REGISTRY)
    assert len(groups(svg, "source")) == attentions
    boxes = groups(svg, "layer")
    box_names = Counter(texts(box)[0].split("(")[0] for box in boxes)
    assert box_names["mh_dot_src_att"] + box_names["dot_src_att"] + box_names["mlp_src_att"] == attentions
    assert all(texts(box)[1].startswith("width ") for box in boxes)


@needs_graphviz
@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_draws_its_structure(name: str) -> None:
    preset = PRESETS[name]
    check_structure(preset_model(name), preset.encoder, preset.decoder)


def test_the_presets_draw_every_published_string() -> None:
    """The paper-row presets pair every one of the 29 published strings (as the paper's code ran them), so the test
    above draws them all."""
    used = {text for preset in PRESETS.values() for text in (preset.encoder, preset.decoder)}
    assert {as_run(text) for text in (*ENCODERS.values(), *DECODERS.values())} <= used


@needs_graphviz
def test_transformer_boxes_frames_and_one_arrow_from_the_encoder_top() -> None:
    svg = model_svg(preset_model("transformer-small"))
    assert [texts(frame) for frame in groups(svg, "repeat")] == [["×3"], ["×3"]]
    assert [t for edge in groups(svg, "bypass") for t in texts(edge)] == ["res_nd"] * 5
    (source,) = groups(svg, "source")
    tail, head = edge_ends(source)
    assert tail.startswith("output") and texts(groups(svg, "output")[0]) == ["encoder output", "width 16"]
    assert texts(next(box for box in groups(svg, "layer") if box.get("id") == head)) == ["mh_dot_src_att", "width 16"]


@needs_graphviz
@pytest.mark.parametrize(("mode", "mapping"), [("increasing", "enc i → dec i"), ("decreasing", "enc i → dec 5−i")])
def test_block_sources_come_from_the_encoder_blocks(mode: str, mapping: str) -> None:
    model = preset_model(f"t2-{mode}")
    svg = model_svg(model)
    (source,) = groups(svg, "source")
    tail, _ = edge_ends(source)
    assert texts(source) == [f"{mode}:", mapping]
    assert tail.startswith("block") and texts(groups(svg, "block")[0]) == ["block i"]
    dot = model_graph(model).source
    encoder_frame = dot[dot.index("cluster_encoder") : dot.index("cluster_decoder")]
    assert f"\t\t\t{tail} [" in encoder_frame[encoder_frame.index("cluster_repeat") :]


@needs_graphviz
def test_blocks_of_two_encoder_repeats_each_send_an_arrow() -> None:
    svg = diagram_svg(
        "repeat(2, res(cnn)) -> repeat(2, highway(ffl))",
        "repeat(4, res(mh_dot_src_att(source=decreasing)) -> parallel(rnn, cnn))",
        ModelOptions(d_model=16, heads=4),
    )
    blocks = {block.get("id"): texts(block) for block in groups(svg, "block")}
    assert sorted(blocks.values()) == [["block i (0 ≤ i ≤ 1)"], ["block i (2 ≤ i ≤ 3)"]]
    assert {edge_ends(edge)[0] for edge in groups(svg, "source")} == set(blocks)
    assert [t for edge in groups(svg, "bypass") for t in texts(edge)] == ["res", "highway", "res"]
    assert ["+"] in [texts(merge) for merge in groups(svg, "merge")]


@needs_graphviz
def test_concat_merges_its_branches_and_input_feeding_loops_back() -> None:
    svg = model_svg(preset_model("rnmt"))
    (concat,) = (merge for merge in groups(svg, "merge") if texts(merge)[0] == "concat")
    assert texts(concat) == ["concat", "width 32"]
    into_concat = [edge_ends(edge)[0] for edge in groups(svg, "flow") if edge_ends(edge)[1] == concat.get("id")]
    assert len(into_concat) == 2
    (feeding,) = groups(svg, "feeding")
    tail, head = edge_ends(feeding)
    fed = next(node for node in groups(svg, "input") if node.get("id") == head)
    assert tail.startswith("output") and texts(fed) == ["concat [z(t−1); E y(t)]", "width 32"]


@needs_graphviz
def test_describe_writes_svg_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["describe", "--preset", "transformer-small", "--d-model", "16", "--heads", "4"]
    assert main([*flags, "--diagram", str(tmp_path / "a.svg")]) == 0
    ET.fromstring((tmp_path / "a.svg").read_text(encoding="utf-8"))
    assert main([*flags, "--diagram", str(tmp_path / "a.html")]) == 0
    page = (tmp_path / "a.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "encoder: pos -&gt; repeat(3" in page
    ET.fromstring(page[page.index("<svg") : page.index("</svg>") + 6])
    assert main([*flags, "--diagram", str(tmp_path / "a.gif")]) == 2
    assert "written as .svg, .html, .png or .pdf, not '.gif'" in capsys.readouterr().err


@needs_graphviz
def test_describe_writes_png_and_pdf(tmp_path: Path) -> None:
    """Papers and slides take PNG or PDF: Graphviz writes them from the same graph as the SVG."""
    flags = ["describe", "--preset", "transformer-small", "--d-model", "16", "--heads", "4"]
    assert main([*flags, "--diagram", str(tmp_path / "a.png")]) == 0
    png = (tmp_path / "a.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")  # the IHDR chunk
    assert width > 200 and height > 800  # a tall diagram at 200 dpi, not an empty image
    assert main([*flags, "--diagram", str(tmp_path / "a.PDF")]) == 0
    pdf = (tmp_path / "a.PDF").read_bytes()
    assert pdf.startswith(b"%PDF-") and b"%%EOF" in pdf[-32:]


@needs_graphviz
def test_a_model_directory_draws_from_its_config(tmp_path: Path) -> None:
    config = ModelConfig("pos -> repeat(2, res(rnn))", "repeat(2, res(rnn) -> res(mlp_att))", 40, 40, d_model=16)
    (tmp_path / "config.json").write_text(json.dumps({"train": {}, "model": config.to_dict()}), encoding="utf-8")
    assert len(groups(model_dir_svg(tmp_path), "source")) == 1
    with pytest.raises(UserError, match="not a model directory"):
        model_dir_svg(tmp_path / "missing")


def test_missing_graphviz_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)  # the Python package is not installed
    with pytest.raises(UserError, match="apt-get install graphviz"):
        model_svg(preset_model("transformer-small"))


def test_missing_dot_program_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("graphviz")
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on it
    with pytest.raises(UserError, match="apt-get install graphviz"):
        model_svg(preset_model("transformer-small"))
