"""Search on CUDA: token-identical to the CPU search (fp32) for every decoder family, greedy and beam; reduced
precisions translate every line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from adlnmt.cli import main
from adlnmt.inference.cuda_graphs import BUCKETS
from adlnmt.inference.search import SearchOptions, translate_ids
from adlnmt.inference.translator import Translator
from test_search import DECODERS, ENCODER

from .conftest import CUDA

pytestmark = CUDA


@pytest.fixture(scope="module")
def trained(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny model per decoder family, trained 60 updates on the GPU."""
    models = {}
    for name, decoder in DECODERS.items():
        model_dir = tmp_path_factory.mktemp(f"cuda-{name}")
        argv = ["train", "--data", str(demo_data / "data"), "--model", str(model_dir), "--encoder", ENCODER,
                "--decoder", decoder, "--d-model", "32", "--heads", "4", "--batch-tokens", "800", "--lr", "3e-3",
                "--max-updates", "60", "--checkpoint-interval", "60", "--no-valid-bleu", "--no-progress",
                "--device", "cuda"]  # fmt: skip
        assert main(argv) == 0
        models[name] = model_dir
    return models


def source_ids(translator: Translator, demo_data: Path, count: int = 40) -> list[list[int]]:
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:count]
    return [translator.data.encode_source(line) for line in lines]


@pytest.mark.parametrize("family", list(DECODERS))
def test_cuda_search_is_token_identical_to_the_cpu_search(
    trained, demo_data: Path, family: str, strict_fp32: None
) -> None:
    cpu = Translator.load(trained[family])
    gpu = Translator.load(trained[family], device="cuda")
    assert next(gpu.model.parameters()).device.type == "cuda"
    sources = source_ids(cpu, demo_data)
    for beam in (1, 5):
        options = SearchOptions(beam=beam, nbest=beam, batch_size=16)
        on_cpu = translate_ids(cpu.model, sources, options)
        on_gpu = translate_ids(gpu.model, sources, options, device="cuda")
        for a, b in zip(on_cpu, on_gpu, strict=True):
            assert [h.tokens for h in a] == [h.tokens for h in b], f"{family}, beam {beam}"
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_reduced_precisions_translate_every_line_on_cuda(trained, demo_data: Path, precision: str) -> None:
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:30]
    reference = Translator.load(trained["transformer"]).translate(lines, SearchOptions(beam=4))
    translator = Translator.load(trained["transformer"], device="cuda", precision=precision)
    found = translator.search(lines, SearchOptions(beam=4, alignments=True))
    assert len(found) == len(lines) and all(hyps[0].text for hyps in found)
    same = sum(hyps[0].text == ref for hyps, ref in zip(found, reference, strict=True))
    assert same >= 0.8 * len(lines), f"{precision}: only {same}/{len(lines)} lines equal the fp32 translation"
    for hyps in found:
        rows = torch.tensor(hyps[0].alignment)
        assert torch.allclose(rows.sum(-1), torch.ones(rows.size(0)), atol=2e-2)


def test_translate_command_on_cuda_writes_the_cpu_lines(
    trained, demo_data: Path, tmp_path: Path, strict_fp32: None
) -> None:
    source = demo_data / "corpus" / "test.src"
    for device in ("cpu", "cuda"):
        argv = ["translate", "--model", str(trained["cnn"]), "--input", str(source), "--output",
                str(tmp_path / device), "--beam", "5", "--device", device]  # fmt: skip
        assert main(argv) == 0
    assert (tmp_path / "cuda").read_text() == (tmp_path / "cpu").read_text()


@pytest.mark.parametrize("family", list(DECODERS))
def test_cuda_graphs_are_token_identical_to_eager_cuda_search(
    trained, demo_data: Path, family: str, strict_fp32: None
) -> None:
    gpu = Translator.load(trained[family], device="cuda")
    sources = source_ids(gpu, demo_data)
    for beam in (1, 5):
        options = SearchOptions(beam=beam, nbest=beam, batch_size=16)
        eager = translate_ids(gpu.model, sources, options, device="cuda")
        graphed = translate_ids(gpu.model, sources, dataclasses.replace(options, cuda_graphs=True), device="cuda")
        for a, b in zip(eager, graphed, strict=True):
            assert [h.tokens for h in a] == [h.tokens for h in b], f"{family}, beam {beam}"
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)
    buckets = BUCKETS[gpu.model]
    assert all(b.capture for b in buckets) and any(b.graphs for b in buckets), f"{family}: no graphs captured"


def test_cuda_graphs_in_bf16_translate_as_eager_bf16(trained, demo_data: Path) -> None:
    gpu = Translator.load(trained["transformer"], device="cuda", precision="bf16")
    lines = (demo_data / "corpus" / "test.src").read_text().splitlines()[:30]
    eager = gpu.translate(lines, SearchOptions(beam=4))
    graphed = gpu.translate(lines, SearchOptions(beam=4, cuda_graphs=True))
    same = sum(a == b for a, b in zip(eager, graphed, strict=True))
    assert same >= 0.9 * len(lines), f"bf16 with CUDA graphs: only {same}/{len(lines)} lines equal eager bf16"
    assert all(b.capture for b in BUCKETS[gpu.model]) and any(b.graphs for b in BUCKETS[gpu.model])
