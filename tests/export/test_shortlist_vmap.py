"""A lexical shortlist as CTranslate2's vocabulary map (``use_vmap``): the same greedy output as the torch engine's
restricted search on the same batches."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from adlnmt.cli import main
from adlnmt.inference.search import SearchOptions, translate_ids
from adlnmt.inference.shortlist import VMAP, Shortlist, load_shortlist
from adlnmt.inference.translator import Translator

from .conftest import demo_sources

pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'adlnmt[ct2]'")


def without(shortlist: Shortlist, token: int) -> Shortlist:
    """``shortlist`` with ``token`` taken out of every list."""
    sources = np.repeat(np.arange(shortlist.src_size), np.diff(shortlist.offsets))
    kept = shortlist.targets != token
    offsets = np.zeros_like(shortlist.offsets)
    np.cumsum(np.bincount(sources[kept], minlength=shortlist.src_size), out=offsets[1:])
    return replace(shortlist, offsets=offsets, targets=shortlist.targets[kept],
                   frequent=shortlist.frequent[shortlist.frequent != token])  # fmt: skip


def test_vmap_gives_ctranslate2_the_torch_engines_restricted_output(
    tiny_models, ct2_export: Path, demo_data: Path, tmp_path: Path
) -> None:
    built = tmp_path / "lex.safetensors"
    assert main(["shortlist", "--data", str(demo_data / "data"), "--k", "20", "--out", str(built)]) == 0
    model = Translator.load(tiny_models["transformer"]).model
    ct2 = Translator.load(ct2_export, engine="ctranslate2")
    sources = demo_sources(ct2, demo_data, 16)
    unrestricted = [hyps[0].tokens for hyps in translate_ids(model, sources, SearchOptions(beam=1))]
    commonest = Counter(t for tokens in unrestricted for t in tokens).most_common(1)[0][0]
    shortlist = tmp_path / "without.safetensors"
    without(load_shortlist(built), commonest).save(shortlist)  # the map must change the output
    assert ct2.engine is not None
    for batch_size in (16, 5):
        options = SearchOptions(beam=1, batch_size=batch_size, shortlist=str(shortlist))
        expected = [hyps[0].tokens for hyps in translate_ids(model, sources, options)]
        found = [hyps[0].tokens for hyps in ct2.engine.translate_ids(sources, options)]
        assert found == expected
        assert all(commonest not in tokens for tokens in found)
    assert not list(ct2_export.rglob(VMAP))  # the export is never changed
