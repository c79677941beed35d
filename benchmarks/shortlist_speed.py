"""Benchmark: decoding with lexical shortlists (``--shortlist``) against the full softmax, same model, same batches.

    .venv/bin/python benchmarks/shortlist_speed.py --model MODEL_DIR --shortlist LEX.safetensors [LEX2 ...]
        [--ct2 EXPORT_DIR] [--threads 2] [--repeat 3] [--lines 0]

Translates Multi30k test_2016_flickr (de→en) in this process, model loaded first (not timed), greedy and beam 5,
batches of 64: the full softmax and each shortlist, with the torch engine (fp32) and, with ``--ct2``, CTranslate2
(its vocabulary map). Settings are interleaved repeat by repeat; each figure is the median of ``--repeat``. Per
setting: sentences/s, the speed ratio to the full softmax of its engine and beam, BLEU (sacreBLEU), the lines equal
to the full softmax's, the mean allowed vocabulary per batch, the 1-minute load average and the cores other
processes kept busy. A Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

import sacrebleu

from adlnmt.bench.machine import BusyBeside, cpu_model
from adlnmt.inference.batching import length_batches
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.shortlist import load_shortlist
from adlnmt.inference.translator import Translator

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "multi30k"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--shortlist", nargs="+", required=True)
    parser.add_argument("--ct2", help="a CTranslate2 export of the same model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lines", type=int, default=0, help="the first N test lines (0: all)")
    args = parser.parse_args()
    source = gzip.decompress((CORPUS / "test_2016_flickr.de.gz").read_bytes()).decode().splitlines()
    reference = gzip.decompress((CORPUS / "test_2016_flickr.en.gz").read_bytes()).decode().splitlines()
    if args.lines:
        source, reference = source[: args.lines], reference[: args.lines]
    engines = {"torch": Translator.load(args.model, threads=args.threads)}
    if args.ct2:
        engines["ctranslate2"] = Translator.load(args.ct2, engine="ctranslate2", threads=args.threads)
    encoded = [engines["torch"].encode(line, i) for i, line in enumerate(source, 1)]
    settings = [(engine, beam, lex) for engine in engines for beam in (1, 5) for lex in (None, *args.shortlist)]
    seconds: dict[tuple, list[float]] = {s: [] for s in settings}
    loads: dict[tuple, list[float]] = {s: [] for s in settings}
    busy: dict[tuple, list[float]] = {s: [] for s in settings}
    outputs: dict[tuple, list[str]] = {}
    for _ in range(args.repeat):
        for setting in settings:
            engine, beam, lex = setting
            options = replace(SearchOptions(beam=beam, batch_size=64), shortlist=lex)
            engines[engine].search_encoded(encoded[:8], options)  # warm: the CT2 map is loaded on first use
            loads[setting].append(os.getloadavg()[0])
            beside, started = BusyBeside(), time.perf_counter()
            found = engines[engine].search_encoded(encoded, options)
            seconds[setting].append(time.perf_counter() - started)
            busy[setting].append(beside.cores() or 0.0)
            outputs[setting] = [hyps[0].text for hyps in found]
    batches = length_batches([len(ids) for ids in encoded], 64)
    sizes = {lex: statistics.mean(len(load_shortlist(lex).allowed([encoded[i] for i in rows])) for rows in batches)
             for lex in args.shortlist}  # fmt: skip
    vocab = engines["torch"].data.tgt_vocab.size
    print(f"{cpu_model()}, {args.threads} threads, {len(source)} sentences, median of {args.repeat}\n")
    print("| engine | beam | shortlist | allowed per batch | sent/s | × full | BLEU | lines = full | load | busy |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for engine, beam, lex in settings:
        setting, full = (engine, beam, lex), (engine, beam, None)
        speed = len(source) / statistics.median(seconds[setting])
        ratio = statistics.median(seconds[full]) / statistics.median(seconds[setting])
        bleu = sacrebleu.corpus_bleu(outputs[setting], [reference]).score
        same = sum(a == b for a, b in zip(outputs[setting], outputs[full], strict=True))
        allowed = f"{sizes[lex]:,.0f}" if lex else f"{vocab:,}"
        load = statistics.mean(loads[setting])
        print(f"| {engine} | {beam} | {Path(lex).name if lex else 'full'} | {allowed} | {speed:.1f} | {ratio:.2f} | "
              f"{bleu:.2f} | {same:,} | {load:.1f} | {max(busy[setting]):.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
