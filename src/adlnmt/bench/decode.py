"""Decoding speed: one row per decoder × beam × mode (the beam table) and per decoder × beam × mode × output
length (the length sweep).

A *decoder* is a model with its workload. A preset is randomly initialised (seeded) and decodes random source
ids whose lengths are the input's word counts (or synthetic lengths), each output forced to exactly as many
tokens as its source has words; a trained model (``--model``) decodes the encoded input lines with real search
(EOS decides the length). The length sweep forces every output to exactly L tokens, for L in ``lengths``, on
``sweep_sentences`` random sources of L words each, for presets and trained models alike.

Timed: ``translate_ids`` over all sentences (length-sorted batches, encoder, search) after a short warm-up (the
first few sentences, at most 16 tokens when lengths are forced); sentencepiece and detokenisation are not.
Target tokens are those of the best hypothesis, EOS excluded. Modes: ``cached`` (incremental decoding, one cached
step per token) and ``uncached`` (the whole prefix re-fed every step, the AAN paper's baseline regime). With
``workers`` > 1 that many forked single-thread processes search the batches (the fork is inside the timed block;
the warm-up runs in this process). PyTorch is imported where a model runs on it: a CTranslate2 export decodes
without it (on the CPU, memory as the process's RSS).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adlnmt.bench.machine import busy_note
from adlnmt.bench.measure import timed
from adlnmt.bench.models import preset_model, random_sources
from adlnmt.inference.options import Hypothesis, SearchOptions

if TYPE_CHECKING:
    from adlnmt.bench.measure import Device
    from adlnmt.model import Seq2Seq
    from adlnmt.train.config import TrainConfig

MODES = {"cached": True, "uncached": False}  # mode → incremental
WARMUP_SENTENCES = 4  # the warm-up decodes the first few sentences, forced lengths capped at WARMUP_LENGTH
WARMUP_LENGTH = 16

Batch = Sequence[Sequence[int]]  # encoded sources
# sources, options, forced output lengths (None: EOS decides) → the hypotheses of each source
Search = Callable[[Batch, SearchOptions, Sequence[int] | None], list[list[Hypothesis]]]


@dataclass
class Decoder:
    label: str
    kind: str  # preset | model
    search: Search  # the PyTorch search over a model, or another engine's (adlnmt.inference.engines)
    sources: list[list[int]]  # beam-table workload (encoded, each ending with EOS)
    exact: list[int] | None  # forced output lengths (presets), or None: real search
    parameters: int | None = None  # of the PyTorch model (None: another engine)
    sweep_vocab: int | None = None  # source vocabulary where output lengths can be forced (the length sweep)


@dataclass
class DecodeSettings:
    beams: list[int]
    modes: list[str]
    search: SearchOptions  # batch size, length penalty and workers; each row sets its beam and mode
    repeat: int
    device: Device  # "cpu" for an engine without PyTorch
    lengths: list[int]  # empty: no length sweep
    sweep_beams: list[int]
    sweep_sentences: int
    seed: int


def torch_decoder(
    label: str, kind: str, model: Seq2Seq, sources: list[list[int]], exact: list[int] | None, device: Device,
    precision: str,
) -> Decoder:  # fmt: skip
    """``model`` in inference ``precision`` on the PyTorch search (its parameter count printed on stderr)."""
    from adlnmt.inference.search import translate_ids
    from adlnmt.inference.translator import with_precision

    print(f"{label}: {model.parameter_count():,} parameters", file=sys.stderr)
    model = with_precision(model, precision, str(device))

    def search(batch: Batch, options: SearchOptions, lengths: Sequence[int] | None) -> list[list[Hypothesis]]:
        return translate_ids(model, batch, options, device, lengths)

    return Decoder(label, kind, search, sources, exact, model.parameter_count(), model.config.src_vocab_size)


def preset_decoder(
    name: str, config: TrainConfig, vocab: int, lengths: list[int], seed: int, device: Device, precision: str
) -> Decoder:
    """Preset ``name`` (its ``config``), seeded random weights, random sources of ``lengths`` words."""
    import numpy as np

    model = preset_model(config, vocab, vocab, seed, device)
    sources = random_sources(lengths, vocab, np.random.default_rng(seed))  # the same sources for every preset
    return torch_decoder(name, "preset", model, sources, list(lengths), device, precision)


def model_decoder(
    label: str, path: Path, checkpoint: str, device: Device, lines: list[str], engine: str = "torch",
    precision: str = "fp32", threads: int = 0,
) -> Decoder:  # fmt: skip
    """A trained model directory (or export directory) on ``engine`` with ``threads`` (0: its default); ``lines``
    (raw text) encoded with its vocabulary. Other engines than torch get ``precision`` at load time (int8: an int8
    export). An export run by CTranslate2 loads without PyTorch."""
    from adlnmt.inference.translator import Translator

    translator = Translator.load(path, checkpoint, str(device), "fp32" if engine == "torch" else precision, engine,
                                 threads=threads)  # fmt: skip
    sources = [translator.encode(line, number) for number, line in enumerate(lines, 1) if line.strip()]
    if translator.model is not None:
        return torch_decoder(label, "model", translator.model, sources, None, device, precision)
    runner = translator.engine

    def search(batch: Batch, options: SearchOptions, lengths: Sequence[int] | None) -> list[list[Hypothesis]]:
        assert lengths is None, "forced output lengths need the PyTorch search"
        return runner.translate_ids(batch, options)

    return Decoder(label, "model", search, sources, None)


def measure(
    decoder: Decoder, sources: list[list[int]], exact: list[int] | None, beam: int, mode: str, settings: DecodeSettings
) -> dict[str, Any]:
    """Time one search over ``sources``: rates per second, ms per sentence and memory."""
    options = replace(settings.search, beam=beam, incremental=MODES[mode])

    def search(count: int, longest: int | None = None) -> list[list[Hypothesis]]:
        lengths = None if exact is None else [min(n, longest or n) for n in exact[:count]]
        return decoder.search(sources[:count], options, lengths)

    search(WARMUP_SENTENCES, WARMUP_LENGTH)
    timing = timed(lambda: search(len(sources)), settings.device, settings.repeat)
    tokens = sum(len(hyps[0].tokens) for hyps in timing.result)
    return {
        "beam": beam,
        "mode": mode,
        "sentences": len(sources),
        "target_tokens": tokens,
        "seconds": timing.seconds,
        "sentences_per_s": len(sources) / timing.seconds,
        "tokens_per_s": tokens / timing.seconds,
        "ms_per_sentence": 1000 * timing.seconds / len(sources),
        "peak_mb": timing.peak_mb,
        "added_mb": timing.added_mb,
        "busy_beside": timing.busy_beside,
    }


Workload = tuple[dict[str, Any], list[list[int]], list[int] | None]  # extra columns, sources, forced lengths


def _rows(
    decoder: Decoder, settings: DecodeSettings, beams: list[int], workloads: Iterable[Workload]
) -> Iterator[dict[str, Any]]:
    """Measure every workload × beam × mode, logging each row to stderr as it is done."""
    head = {"decoder": decoder.label, "kind": decoder.kind, "parameters": decoder.parameters}
    for extra, sources, exact in workloads:
        for beam in beams:
            for mode in settings.modes:
                row = {**head, **extra, **measure(decoder, sources, exact, beam, mode, settings)}
                length = f" length {row['length']}" if "length" in row else ""
                rates = f"{row['sentences_per_s']:.2f} sent/s, {row['ms_per_sentence']:.1f} ms/sent"
                busy = busy_note(row["busy_beside"])
                print(f"  {decoder.label} beam {beam} {mode}{length}: {rates} ({row['seconds']:.1f} s{busy})",
                      file=sys.stderr)  # fmt: skip
                yield row


def table_rows(decoder: Decoder, settings: DecodeSettings) -> Iterator[dict[str, Any]]:
    """The beam table: every beam × mode on the decoder's workload."""
    yield from _rows(decoder, settings, settings.beams, [({}, decoder.sources, decoder.exact)])


def length_rows(decoder: Decoder, settings: DecodeSettings) -> Iterator[dict[str, Any]]:
    """The length sweep: for each L, ``sweep_sentences`` random sources of L words, outputs of exactly L tokens."""
    vocab, count = decoder.sweep_vocab, settings.sweep_sentences
    if vocab is None:
        return  # forced output lengths need the PyTorch search
    import numpy as np

    workloads = (
        ({"length": n}, random_sources([n] * count, vocab, np.random.default_rng((settings.seed, n))), [n] * count)
        for n in settings.lengths
    )
    yield from _rows(decoder, settings, settings.sweep_beams, workloads)


def add_ratios(rows: list[dict[str, Any]], baseline: str) -> None:
    """In place: ``speedup_vs_baseline`` = baseline's seconds / this row's at the same beam, mode (and length);
    ``cache_speedup`` = uncached seconds / cached seconds of the same decoder and beam (and length)."""

    def key(row: dict[str, Any], *names: str) -> tuple:
        return tuple(row.get(name) for name in (*names, "beam", "length"))

    seconds = {key(row, "decoder", "mode"): row["seconds"] for row in rows}
    for row in rows:
        base = seconds.get((baseline, row["mode"], *key(row)))
        row["speedup_vs_baseline"] = base / row["seconds"] if base is not None else None
        cached = seconds.get((row["decoder"], "cached", *key(row)))
        uncached = seconds.get((row["decoder"], "uncached", *key(row)))
        row["cache_speedup"] = uncached / cached if cached and uncached else None
