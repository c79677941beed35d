"""Is COMET's deficit on short sentences a defect? Decode a test set's short and long sources with the model's batch
norm in four ways and compare (issue 38, point 4; the findings are in experiments/README.md, "COMET's short
sentences"):

- ``running``: the running averages, as every evaluation does (the grid's numbers);
- ``alone``: each short sentence in a batch of its own, running averages: its output must equal ``running`` token
  for token, or padding leaks into real positions (the convolutions' zero padding, the masks of the batch
  statistics); longer sentences keep their ``running`` output;
- ``batch-stats``: the statistics of the decoded batch itself (its real positions), as in training, where each
  batch of similar-length sentences is normalised by its own statistics;
- ``precise``: the running averages recomputed as the plain mean over ``--calibration-batches`` training batches
  (length-bucketed, ``--batch-tokens`` each, as the trainer makes them) instead of the exponential average
  (momentum 0.1, i.e. mostly the last ~10 updates' batches) that training leaves: "precise BN" (Wu & Johnson 2021,
  "Rethinking 'Batch' in BatchNorm").

A model without batch norm (the Transformer rows) is a control: all four decode the same. Prints one Markdown table:
per model, mode and source-length slice, sentBLEU, BLEU, the hypothesis/reference length ratio and how many
outputs differ from ``running``.

    python experiments/analysis/batchnorm_short_sentences.py MODEL_DIR [MODEL_DIR ...] \\
        --src ../shared/data/multi30k/val.de.gz --ref ../shared/data/multi30k/val.en.gz \\
        --train-src ../shared/data/multi30k/train.de.gz [--device cuda] [--beam 1]
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch

from adlnmt.inference.search import SearchOptions, pad_batch
from adlnmt.inference.translator import Translator
from adlnmt.layers.norm import MaskedBatchNorm
from adlnmt.metrics import read_lines, score
from adlnmt.train.device import full_fp32

MODES = ("running", "alone", "batch-stats", "precise")


def batch_norms(translator: Translator) -> list[MaskedBatchNorm]:
    assert translator.model is not None
    return [module for module in translator.model.modules() if isinstance(module, MaskedBatchNorm)]


@contextlib.contextmanager
def batch_statistics(norms: list[MaskedBatchNorm]) -> Iterator[None]:
    """Batch norm normalises with the statistics of the batch it sees (training mode, whatever the model's mode),
    leaving its running averages as they are (momentum 0)."""
    momenta = [norm.momentum for norm in norms]
    hooks = [norm.register_forward_pre_hook(lambda module, _: setattr(module, "training", True)) for norm in norms]
    for norm in norms:
        norm.momentum = 0.0
    try:
        yield
    finally:
        for norm, momentum, hook in zip(norms, momenta, hooks, strict=True):
            hook.remove()
            norm.momentum = momentum
            norm.training = False


def training_batches(translator: Translator, path: str, batch_tokens: int, count: int) -> list[list[list[int]]]:
    """``count`` batches of encoded training sources, each of similar lengths and at most ``batch_tokens`` tokens,
    drawn evenly from the length-sorted corpus."""
    sources = sorted((translator.data.encode_source(line, translator.max_input_len)
                      for line in read_lines(path) if line.strip()), key=len)  # fmt: skip
    batches, batch = [], []
    for source in sources:
        if batch and (len(batch) + 1) * len(source) > batch_tokens:
            batches.append(batch)
            batch = []
        batch.append(source)
    batches.append(batch)
    step = max(1, len(batches) // count)
    return batches[::step][:count]


@torch.no_grad()
def precise_statistics(translator: Translator, norms: list[MaskedBatchNorm], batches: list[list[list[int]]]) -> None:
    """Replace the running averages with the plain mean of the batch statistics over ``batches``."""
    assert translator.model is not None
    for number, batch in enumerate(batches):
        for norm in norms:
            norm.momentum = 1.0 / (number + 1)  # running = mean of the first number + 1 batches' statistics
        with batch_statistics_updating(norms):
            translator.model.encode(pad_batch(batch, translator.device))
    for norm in norms:
        norm.momentum = 0.1


@contextlib.contextmanager
def batch_statistics_updating(norms: list[MaskedBatchNorm]) -> Iterator[None]:
    for norm in norms:
        norm.training = True
    try:
        yield
    finally:
        for norm in norms:
            norm.training = False


def decode(translator: Translator, sources: list[str], mode: str, options: SearchOptions,
           running: list[str], short: int) -> list[str]:  # fmt: skip
    if mode == "alone":  # the short sources only (the question is theirs); the others keep their running output
        return [translator.translate([line], options)[0] if len(line.split()) <= short else found
                for line, found in zip(sources, running, strict=True)]  # fmt: skip
    with batch_statistics(batch_norms(translator)) if mode == "batch-stats" else contextlib.nullcontext():
        return translator.translate(sources, options)


def label(model_dir: str) -> str:
    """``…/runs/COMET/seed-3/model`` → ``COMET/seed-3``."""
    return "/".join(Path(model_dir).resolve().parts[-3:-1])


def slices(sources: list[str], short: int) -> dict[str, list[int]]:
    lengths = [len(line.split()) for line in sources]
    return {f"1-{short} words": [i for i, n in enumerate(lengths) if n <= short],
            f"{short + 1}+ words": [i for i, n in enumerate(lengths) if n > short],
            "all": list(range(len(sources)))}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--src", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--train-src", required=True, help="training sources for the precise statistics")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--beam", type=int, default=1, help="1: greedy, as COMET Table 1")
    parser.add_argument("--short", type=int, default=7, help="short: at most this many source words")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--calibration-batches", type=int, default=200)
    parser.add_argument("--limit", type=int, help="only the first N test sentences (a quick try)")
    args = parser.parse_args()
    full_fp32()  # as the grids train and evaluate
    sources, references = read_lines(args.src)[: args.limit], read_lines(args.ref)[: args.limit]
    options = SearchOptions(beam=args.beam, batch_size=64)
    print("| model | mode | slice | sentences | sentBLEU | BLEU | hyp/ref words | differ from running |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for model_dir in args.models:
        translator = Translator.load(model_dir, "best", args.device)
        norms = batch_norms(translator)
        found: dict[str, list[str]] = {}
        for mode in MODES if norms else ("running", "alone"):
            if mode == "precise":
                calibration = training_batches(translator, args.train_src, args.batch_tokens, args.calibration_batches)
                precise_statistics(translator, norms, calibration)
            found[mode] = decode(translator, sources, mode, options, found.get("running", []), args.short)
            for name, rows in slices(sources, args.short).items():
                hyps, refs = [found[mode][i] for i in rows], [references[i] for i in rows]
                scores = score(hyps, refs, ("sentbleu", "bleu"))
                ratio = sum(len(h.split()) for h in hyps) / max(1, sum(len(r.split()) for r in refs))
                differ = sum(1 for i in rows if found[mode][i] != found["running"][i])
                print(f"| {label(model_dir)} | {mode} | {name} | "
                      f"{len(rows)} | {scores['sentbleu']:.2f} | {scores['bleu']:.2f} | {ratio:.3f} | {differ} |",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
