"""CTranslate2 export of imported MarianMT models (``ffl(act=swish)``, ``pos(layout=halves)``, ``pos(scale=false)``,
separate vocabularies): greedy output token-identical to the torch engine, beam hypotheses with the torch engine's
log-probabilities, and empty outputs where the torch engine gives them (CTranslate2's default minimum output length
is one token)."""

from __future__ import annotations

from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from adlnmt.cli import main
from adlnmt.inference.batching import length_limit
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.translator import Translator
from interop.marian_fixtures import SAMPLE, marian_dir

pytest.importorskip("transformers")
pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'adlnmt[ct2]'")

CONFIGURATIONS = {
    "swish": {"seed": 12},
    "swish-separate-vocabs-unscaled": {"seed": 11, "separate": True, "scale_embedding": False},
}
GREEDY = SearchOptions(beam=1, max_len_ratio=1.5, max_len_extra=5)


def import_and_export(hf: Path, root: Path) -> tuple[Translator, Translator]:
    assert main(["import", str(hf), "--from", "hf-marian", "--out", str(root / "model")]) == 0
    assert main(["export", "--model", str(root / "model"), "--format", "ctranslate2", "--out", str(root / "ct2")]) == 0
    return Translator.load(root / "model"), Translator.load(root / "ct2")


@pytest.fixture(scope="module", params=list(CONFIGURATIONS))
def engines(request, demo_data: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp(request.param)
    marian_dir(demo_data / "corpus", root / "hf", **CONFIGURATIONS[request.param])
    return (*import_and_export(root / "hf", root), root)


def sources(demo_data: Path) -> list[str]:
    return (demo_data / "corpus" / "valid.src").read_text(encoding="utf-8").splitlines()[:SAMPLE]


def test_greedy_equals_the_torch_engine(engines, demo_data: Path) -> None:
    torch_engine, ct2_engine, _ = engines
    expected = [hyps[0].pieces for hyps in torch_engine.search(sources(demo_data), GREEDY)]
    assert [hyps[0].pieces for hyps in ct2_engine.search(sources(demo_data), GREEDY)] == expected
    assert sum(map(bool, expected)) >= SAMPLE // 2  # most outputs are not empty: the test compares tokens


def test_beam_hypotheses_have_the_torch_engines_log_probs(engines, demo_data: Path) -> None:
    """Hypotheses both beam searches find and that end before the length limit (CTranslate2 cuts the others
    without </s>) have the same log-probabilities."""
    options = SearchOptions(beam=5, nbest=5, max_len_ratio=1.5, max_len_extra=5)
    lines = sources(demo_data)
    limits = [length_limit(len(engines[0].encode_line(line).ids), options) for line in lines]
    shared = 0
    results = (engine.search(lines, options) for engine in engines[:2])
    for ours, theirs, limit in zip(*results, limits, strict=True):
        log_probs = {tuple(h.pieces): h.log_prob for h in ours if len(h.pieces) < limit}
        for hyp in theirs:
            if tuple(hyp.pieces) in log_probs:
                shared += 1
                assert hyp.log_prob == pytest.approx(log_probs[tuple(hyp.pieces)], abs=1e-3)
    assert shared >= SAMPLE


def test_an_output_may_be_empty(engines, demo_data: Path, tmp_path: Path) -> None:
    """A model whose </s> outweighs everything translates every line as nothing, in both engines."""
    source = engines[2] / "hf"
    hf = tmp_path / "hf"
    hf.mkdir()
    for path in source.iterdir():
        (hf / path.name).write_bytes(path.read_bytes())
    tensors = load_file(hf / "model.safetensors")
    tensors["final_logits_bias"][0, 0] = 1000.0
    save_file(tensors, hf / "model.safetensors", metadata={"format": "pt"})
    torch_engine, ct2_engine = import_and_export(hf, tmp_path)
    for engine in (torch_engine, ct2_engine):
        assert [hyps[0].pieces for hyps in engine.search(sources(demo_data)[:3], GREEDY)] == [[], [], []]
