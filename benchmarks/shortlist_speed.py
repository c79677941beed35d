"""Benchmark: decoding with lexical shortlists (``--shortlist``) against the full softmax, same model, same batches.

    .venv/bin/python benchmarks/shortlist_speed.py --model MODEL_DIR --shortlist LEX.safetensors [LEX2 ...]
        [--checkpoint best] [--length-penalty 1.0] [--ct2 EXPORT_DIR] [--threads 2] [--repeat 3] [--lines 0]
        [--batch-size 64] [--exact-lengths]

Translates Multi30k test_2016_flickr (de→en) in this process, model loaded first (not timed), greedy and beam 5,
batches of ``--batch-size`` (64): the full softmax and each shortlist, with the torch engine (fp32) and, with
``--ct2``, CTranslate2 (its vocabulary map). Settings are interleaved repeat by repeat; each figure is the median
of ``--repeat``. Per setting: sentences/s, the speed ratio to the full softmax of its engine and beam, the
process's CPU seconds and their ratio (steadier than wall time on a loaded machine, with one thread), BLEU
(sacreBLEU), the lines equal to the full softmax's, the mean allowed vocabulary per batch, the 1-minute load
average and the cores other processes kept busy. A Markdown table on stdout. ``--exact-lengths`` (torch only)
forces every output to its reference's length in target pieces, for a speed comparison on an untrained model (its
BLEU means nothing then; CTranslate2 ends where its search ends: compare its pieces per sentence).
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
from adlnmt.inference.search import translate_ids
from adlnmt.inference.shortlist import load_shortlist
from adlnmt.inference.translator import Translator

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "multi30k"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--shortlist", nargs="+", required=True)
    parser.add_argument("--checkpoint", default="best", help="best, last or averaged (default best)")
    parser.add_argument("--length-penalty", type=float, default=1.0, help="GNMT alpha (default 1.0)")
    parser.add_argument("--ct2", help="a CTranslate2 export of the same model (and checkpoint)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lines", type=int, default=0, help="the first N test lines (0: all)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    parser.add_argument("--exact-lengths", action="store_true", help="outputs as long as the references (torch)")
    args = parser.parse_args()
    source = gzip.decompress((CORPUS / "test_2016_flickr.de.gz").read_bytes()).decode().splitlines()
    reference = gzip.decompress((CORPUS / "test_2016_flickr.en.gz").read_bytes()).decode().splitlines()
    if args.lines:
        source, reference = source[: args.lines], reference[: args.lines]
    engines = {"torch": Translator.load(args.model, args.checkpoint, threads=args.threads)}
    if args.ct2:
        engines["ctranslate2"] = Translator.load(args.ct2, engine="ctranslate2", threads=args.threads)
    encoded = [engines["torch"].encode(line, i) for i, line in enumerate(source, 1)]
    tgt_vocab = engines["torch"].data.tgt_vocab
    lengths = [len(tgt_vocab.encode(line)) + 1 for line in reference] if args.exact_lengths else None

    def search(engine: str, options: SearchOptions, sentences: list[list[int]]) -> list[list[int]]:
        """The 1-best token ids (exact lengths: the torch model's search with each reference's length)."""
        if lengths is None or engine != "torch":
            return [hyps[0].tokens for hyps in engines[engine].engine.translate_ids(sentences, options)]
        found = translate_ids(engines[engine].model, sentences, options, exact_lengths=lengths[: len(sentences)])
        return [hyps[0].tokens for hyps in found]

    settings = [(engine, beam, lex) for engine in engines for beam in (1, 5) for lex in (None, *args.shortlist)]
    seconds: dict[tuple, list[float]] = {s: [] for s in settings}
    loads: dict[tuple, list[float]] = {s: [] for s in settings}
    busy: dict[tuple, list[float]] = {s: [] for s in settings}
    cpu: dict[tuple, list[float]] = {s: [] for s in settings}
    outputs: dict[tuple, list[list[int]]] = {}
    for _ in range(args.repeat):
        for setting in settings:
            engine, beam, lex = setting
            options = replace(SearchOptions(beam=beam, batch_size=args.batch_size, length_penalty=args.length_penalty),
                              shortlist=lex)  # fmt: skip
            search(engine, options, encoded[:8])  # warm: the CT2 map is loaded on first use
            loads[setting].append(os.getloadavg()[0])
            beside, started, processor = BusyBeside(), time.perf_counter(), time.process_time()
            outputs[setting] = search(engine, options, encoded)
            seconds[setting].append(time.perf_counter() - started)
            cpu[setting].append(time.process_time() - processor)
            busy[setting].append(beside.cores() or 0.0)
    batches = length_batches([len(ids) for ids in encoded], args.batch_size)
    sizes = {lex: statistics.mean(len(load_shortlist(lex).allowed([encoded[i] for i in rows])) for rows in batches)
             for lex in args.shortlist}  # fmt: skip
    vocab = engines["torch"].data.tgt_vocab.size
    print(f"{cpu_model()}, {args.threads} threads, {len(source)} sentences, batches of {args.batch_size}, median of "
          f"{args.repeat}\n")  # fmt: skip
    print("| engine | beam | shortlist | allowed per batch | sent/s | × full | CPU s | × full (CPU) | BLEU "
          "| lines = full | pieces/sentence | load | busy |")  # fmt: skip
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for engine, beam, lex in settings:
        setting, full = (engine, beam, lex), (engine, beam, None)
        speed = len(source) / statistics.median(seconds[setting])
        ratio = statistics.median(seconds[full]) / statistics.median(seconds[setting])
        processor = statistics.median(cpu[setting])
        cpu_ratio = statistics.median(cpu[full]) / processor
        texts = [tgt_vocab.decode(tokens) for tokens in outputs[setting]]
        bleu = "–" if lengths else f"{sacrebleu.corpus_bleu(texts, [reference]).score:.2f}"
        same = sum(a == b for a, b in zip(outputs[setting], outputs[full], strict=True))
        pieces = statistics.mean(len(tokens) for tokens in outputs[setting])
        allowed = f"{sizes[lex]:,.0f}" if lex else f"{vocab:,}"
        load = statistics.mean(loads[setting])
        print(f"| {engine} | {beam} | {Path(lex).name if lex else 'full'} | {allowed} | {speed:.1f} | {ratio:.2f} | "
              f"{processor:.2f} | {cpu_ratio:.2f} | {bleu} | {same:,} | {pieces:.1f} | {load:.1f} | "
              f"{max(busy[setting]):.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
