"""Benchmark: adlnmt's pre-norm Transformer against fairseq 0.12.3's on Multi30k de→en, at equal updates.

    .venv/bin/python benchmarks/fairseq_compare.py [--updates 800] [--out ../fs-runs/compare]
        [--fairseq-venv ../fsvenv] [--adlnmt-arg=--init --adlnmt-arg=xavier ...] [--only adlnmt|fairseq]

Both toolkits get the very same subwords: ``adlnmt prepare`` (joint unigram sentencepiece, 8k) writes the ids, and
the kept training pairs and the validation set are written back as pieces for ``fairseq-preprocess`` with a
dictionary made of the sentencepiece vocabulary (the test set is encoded with the same sentencepiece model). Model:
d 256, 3+3 layers, 4 heads, FFN 1024, pre-norm, all embeddings tied, dropout 0.1, label smoothing 0.1; Adam
β = (0.9, 0.98), lr 1e-3 inverse-sqrt after 200 warm-up updates, seed 1; each toolkit with its own defaults
otherwise (adlnmt: clip 1.0, ε 1e-9; fairseq: no clipping, ε 1e-8) unless ``--adlnmt-arg`` / ``--fairseq-arg`` add
flags. Batches: both fill a batch while max(source, target length incl. EOS) × sentences ≤ 4096; fairseq gets
``--required-batch-size-multiple 1`` (its default 8 would cut batches to multiples of 8 sentences).

The two trainings run side by side, one thread each; both validate every ``--interval`` updates. The curves are
the validation NLL in nats per target token (EOS included; fairseq's base-2 ``nll_loss`` × ln 2) and its
perplexity. The last checkpoint of each translates test_2016_flickr with beam 5 (each toolkit's length
normalisation), scored with sacreBLEU. Results: ``OUT/results.json`` and a Markdown table on stdout. Skips with a
message when the corpus or fairseq's virtual environment is absent. fairseq is no dependency of adlnmt.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import sacrebleu
import sentencepiece as spm

from adlnmt.data.data_dir import DataDir

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "data" / "multi30k"
ADLNMT = [sys.executable, "-m", "adlnmt"]
SPLITS = ("train", "val", "test_2016_flickr")
MODEL = ["--encoder-layers", "3", "--decoder-layers", "3", "--encoder-embed-dim", "256", "--decoder-embed-dim", "256",
         "--encoder-ffn-embed-dim", "1024", "--decoder-ffn-embed-dim", "1024", "--encoder-attention-heads", "4",
         "--decoder-attention-heads", "4", "--encoder-normalize-before", "--decoder-normalize-before",
         "--share-all-embeddings", "--dropout", "0.1"]  # fmt: skip
FAIRSEQ_VALID = re.compile(r"valid on 'valid' subset \| .*\| nll_loss ([0-9.]+) \| .*\| num_updates (\d+)")


def single_threaded() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run(command: list[str], log: Path | None = None) -> None:
    print("+", " ".join(command), flush=True)
    if log is None:
        subprocess.run(command, check=True, env=single_threaded())
        return
    with log.open("w") as out:
        subprocess.run(command, check=True, env=single_threaded(), stdout=out, stderr=subprocess.STDOUT)


def unzip_corpus(raw: Path) -> dict[str, Path]:
    raw.mkdir(parents=True, exist_ok=True)
    files = {}
    for split in SPLITS:
        for lang in ("de", "en"):
            target = files[f"{split}.{lang}"] = raw / f"{split}.{lang}"
            if not target.exists():
                target.write_bytes(gzip.decompress((CORPUS / f"{split}.{lang}.gz").read_bytes()))
    return files


def export_pieces(data: Path, files: dict[str, Path], text: Path) -> None:
    """adlnmt's prepared ids as sentencepiece pieces for fairseq (train: the pairs prepare kept), the test set
    encoded with the same model, and a fairseq dictionary of every non-special piece in id order."""
    text.mkdir(parents=True, exist_ok=True)
    model = spm.SentencePieceProcessor(model_file=str(data / "spm.model"))
    prepared = DataDir.load(data)
    for split in ("train", "valid"):
        shards = [prepared.open_shard(split, i) for i in range(len(prepared.shards(split)))]
        for side, lang in (("src", "de"), ("tgt", "en")):
            lines = (" ".join(model.id_to_piece(int(i)) for i in tokens[a:b])
                     for tokens, offsets in (shard.arrays(side) for shard in shards)
                     for a, b in itertools.pairwise(offsets))  # fmt: skip
            (text / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines))
    for lang in ("de", "en"):
        sentences = files[f"test_2016_flickr.{lang}"].read_text().splitlines()
        (text / f"test.{lang}").write_text("".join(" ".join(model.encode(s, out_type=str)) + "\n" for s in sentences))
    specials = {model.pad_id(), model.unk_id(), model.bos_id(), model.eos_id()}
    pieces = (model.id_to_piece(i) for i in range(model.get_piece_size()) if i not in specials)
    (text / "dict.txt").write_text("".join(f"{piece} 1\n" for piece in pieces))


def adlnmt_curve(model: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (model / "metrics.jsonl").read_text().splitlines()]
    return {r["update"]: math.log(r["valid_ppl"]) for r in records if "valid_ppl" in r}


def fairseq_curve(log: Path) -> dict[int, float]:
    found = (FAIRSEQ_VALID.search(line) for line in log.read_text().splitlines())
    return {int(m.group(2)): float(m.group(1)) * math.log(2) for m in found if m}


def fairseq_hypotheses(output: str) -> list[str]:
    hyps = [line.split("\t") for line in output.splitlines() if line.startswith("D-")]
    return [text for _, _, text in sorted(hyps, key=lambda h: int(h[0][2:]))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=800)
    parser.add_argument("--interval", type=int, default=100, help="updates between validations")
    parser.add_argument("--out", type=Path, default=ROOT.parent / "fs-runs" / "compare")
    parser.add_argument("--fairseq-venv", type=Path, default=ROOT.parent / "fsvenv")
    parser.add_argument("--adlnmt-arg", action="append", default=[], help="extra adlnmt train flag (repeatable)")
    parser.add_argument("--fairseq-arg", action="append", default=[], help="extra fairseq-train flag (repeatable)")
    parser.add_argument("--only", choices=("adlnmt", "fairseq"), help="train and decode one toolkit only")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    fairseq_bin = args.fairseq_venv / "bin"
    if not CORPUS.is_dir():
        print(f"skipped: Multi30k not found at {CORPUS}")
        return 0
    if args.only != "adlnmt" and not (fairseq_bin / "fairseq-train").is_file():
        print(f"skipped: no fairseq-train in {fairseq_bin} (install fairseq into a separate venv)")
        return 0
    out = args.out
    files = unzip_corpus(out / "raw")
    data, text, binary = out / "data", out / "fairseq-text", out / "fairseq-bin"
    if not (data / "manifest.json").exists():
        run([*ADLNMT, "prepare", "--train-src", str(files["train.de"]), "--train-tgt", str(files["train.en"]),
             "--valid-src", str(files["val.de"]), "--valid-tgt", str(files["val.en"]), "--out", str(data),
             "--vocab-size", "8000", "--joint", "--model-type", "unigram"])  # fmt: skip
    if args.only != "adlnmt" and not (binary / "dict.en.txt").exists():
        export_pieces(data, files, text)
        run([str(fairseq_bin / "fairseq-preprocess"), "--source-lang", "de", "--target-lang", "en",
             "--trainpref", str(text / "train"), "--validpref", str(text / "valid"), "--testpref", str(text / "test"),
             "--srcdict", str(text / "dict.txt"), "--tgtdict", str(text / "dict.txt"), "--destdir", str(binary),
             "--workers", "1"])  # fmt: skip
    adl_model, fs_model = out / "adlnmt-model", out / "fairseq-model"
    adl_train = [*ADLNMT, "train", "--data", str(data), "--model", str(adl_model), "--preset", "transformer-small",
                 "--d-model", "256", "--heads", "4", "--d-ff", "1024", "--dropout", "0.1", "--label-smoothing", "0.1",
                 "--tie-output", "--tie-source", "--batch-tokens", "4096", "--lr", "1e-3", "--lr-schedule",
                 "inverse-sqrt", "--warmup", "200", "--adam-beta2", "0.98", "--seed", str(args.seed), "--threads", "1",
                 "--max-updates", str(args.updates), "--checkpoint-interval", str(args.interval), "--keep-last", "1",
                 "--no-valid-bleu", "--patience", "0", "--no-progress", "--device", "cpu",
                 *args.adlnmt_arg]  # fmt: skip
    fs_train = [str(fairseq_bin / "fairseq-train"), str(binary), "--cpu", "--num-workers", "0", "--task",
                "translation", "--source-lang", "de", "--target-lang", "en", "--arch", "transformer", *MODEL,
                "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens", "4096",
                "--required-batch-size-multiple", "1", "--optimizer", "adam", "--adam-betas", "(0.9,0.98)",
                "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "200", "--warmup-init-lr",
                "1e-7", "--seed", str(args.seed), "--max-update", str(args.updates), "--validate-interval-updates",
                str(args.interval), "--validate-interval", "100000", "--save-interval", "100000",
                "--no-epoch-checkpoints", "--save-dir", str(fs_model), "--log-format", "simple",
                *args.fairseq_arg]  # fmt: skip
    jobs = {"adlnmt": adl_train, "fairseq": fs_train}
    jobs = {name: command for name, command in jobs.items() if args.only in (None, name)}
    start, running, seconds = time.monotonic(), {}, {}
    for name, command in jobs.items():
        print("+", " ".join(command), flush=True)
        log = (out / f"{name}-train.log").open("w")
        # A session of its own: with the kernel's autogroup scheduling every session gets an equal CPU share,
        # so two trainings in one session would share what one gets beside other users' processes.
        running[name] = subprocess.Popen(
            command, env=single_threaded(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    for name, process in running.items():
        if process.wait():
            print(f"{name} training failed: see {out / f'{name}-train.log'}")
            return 1
        seconds[name] = time.monotonic() - start
    curves = {}
    bleu = {}
    refs = files["test_2016_flickr.en"].read_text().splitlines()
    if "adlnmt" in jobs:
        curves["adlnmt"] = adlnmt_curve(adl_model)
        hyp = out / "adlnmt.test.hyp.en"
        run([*ADLNMT, "translate", "--model", str(adl_model), "--checkpoint", "last", "--input",
             str(files["test_2016_flickr.de"]), "--output", str(hyp), "--beam", "5", "--threads", "1",
             "--engine", "torch", "--device", "cpu"])  # fmt: skip
        bleu["adlnmt"] = sacrebleu.corpus_bleu(hyp.read_text().splitlines(), [refs]).score
    if "fairseq" in jobs:
        curves["fairseq"] = fairseq_curve(out / "fairseq-train.log")
        generate = [str(fairseq_bin / "fairseq-generate"), str(binary), "--cpu", "--gen-subset", "test", "--path",
                    str(fs_model / "checkpoint_last.pt"), "--beam", "5", "--batch-size", "64", "--remove-bpe",
                    "sentencepiece", "--source-lang", "de", "--target-lang", "en"]  # fmt: skip
        print("+", " ".join(generate), flush=True)
        env = {**single_threaded(), "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
        output = subprocess.run(generate, check=True, env=env, capture_output=True, text=True).stdout
        hyps = fairseq_hypotheses(output)
        (out / "fairseq.test.hyp.en").write_text("".join(h + "\n" for h in hyps))
        bleu["fairseq"] = sacrebleu.corpus_bleu(hyps, [refs]).score
    results = {"updates": args.updates, "threads": 1, "train_wall_seconds": seconds, "test_bleu_beam5": bleu,
               "valid_nll_nats": curves, "adlnmt_args": args.adlnmt_arg, "fairseq_args": args.fairseq_arg}  # fmt: skip
    (out / "results.json").write_text(json.dumps(results, indent=2))
    names = list(curves)
    print("| update | " + " | ".join(f"{n} nll | {n} ppl" for n in names) + " |")
    print("|---:|" + "---:|---:|" * len(names))
    for update in sorted(set().union(*curves.values())):
        cells = [f"{curves[n][update]:.3f} | {math.exp(curves[n][update]):.2f}" if update in curves[n] else "– | –"
                 for n in names]  # fmt: skip
        print(f"| {update} | " + " | ".join(cells) + " |")
    print("test_2016_flickr BLEU (beam 5): " + ", ".join(f"{n} {b:.2f}" for n, b in bleu.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
