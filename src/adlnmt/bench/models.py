"""What the benchmarks run on: presets (randomly initialised, seeded) at a chosen size, named groups of
presets, and synthetic sentence lengths and token ids. PyTorch is imported where a preset is built."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from adlnmt.data.vocab import EOS
from adlnmt.errors import UserError
from adlnmt.presets import PRESET_GROUPS, get_preset

if TYPE_CHECKING:
    import numpy as np
    import torch

    from adlnmt.model import Seq2Seq
    from adlnmt.train.config import TrainConfig

FIRST_WORD_ID = 4  # after PAD, UNK, BOS, EOS

SYNTHETIC_LENGTHS = (6, 20)  # default synthetic sentences: uniformly 6..20 words (mean 13, like Multi30k)


def expand_presets(names: list[str]) -> list[str]:
    """Preset names in order, without repeats: commas split, ``@group`` expands; an unknown name is a UserError."""
    found: list[str] = []
    for item in (part.strip() for name in names for part in name.split(",")):
        if not item:
            continue
        if item.startswith("@"):
            if item not in PRESET_GROUPS:
                raise UserError(f"unknown preset group '{item}' (groups: {', '.join(PRESET_GROUPS)})")
            members = list(PRESET_GROUPS[item])
        else:
            get_preset(item)  # raises the UserError naming the preset
            members = [item]
        found.extend(m for m in members if m not in found)
    if not found:
        raise UserError("--preset needs at least one preset name")
    return found


def preset_configs(names: list[str], overrides: dict[str, Any]) -> dict[str, TrainConfig]:
    """Each preset's options with the ``overrides`` (d_model, heads, d_ff, ... given on the command line), checked
    up front by building every model on the meta device (a bad size fails before any measurement)."""
    import torch

    from adlnmt.model import Seq2Seq
    from adlnmt.train.config import build_config

    configs = {}
    for name in names:
        configs[name] = build_config({"preset": name, **{k: v for k, v in overrides.items() if v is not None}})
        with torch.device("meta"):
            Seq2Seq(configs[name].model_config(FIRST_WORD_ID + 1, FIRST_WORD_ID + 1))
    return configs


def preset_model(config: TrainConfig, src_vocab: int, tgt_vocab: int, seed: int, device: torch.device) -> Seq2Seq:
    """A randomly initialised model (seeded) with vocabularies of the given sizes."""
    import torch

    from adlnmt.model import Seq2Seq

    torch.manual_seed(seed)
    return Seq2Seq(config.model_config(src_vocab, tgt_vocab)).to(device)


def input_lines(path: Path, limit: int | None = None) -> list[str]:
    """The first ``limit`` (default: all) non-empty lines of a UTF-8 text file, gzip where it ends in ``.gz``
    (invalid UTF-8 or a corrupt stream: an error naming the file and line)."""
    from adlnmt.data.corpus import read_lines

    if not path.is_file():
        raise UserError(f"{path}: input file not found")
    lines = [line for line in read_lines(path) if line.split()]
    if not lines:
        raise UserError(f"{path}: no non-empty lines")
    return lines[:limit]


def synthetic_lengths(count: int, rng: np.random.Generator) -> list[int]:
    """``count`` sentence lengths drawn uniformly from ``SYNTHETIC_LENGTHS``."""
    low, high = SYNTHETIC_LENGTHS
    return rng.integers(low, high + 1, size=count).tolist()


def random_sources(lengths: list[int], vocab: int, rng: np.random.Generator) -> list[list[int]]:
    """Encoder inputs of random word ids: ``length`` ids then EOS each."""
    if vocab <= FIRST_WORD_ID:
        raise UserError(f"--vocab must be larger than {FIRST_WORD_ID}, got {vocab}")
    return [[*rng.integers(FIRST_WORD_ID, vocab, size=n).tolist(), EOS] for n in lengths]
