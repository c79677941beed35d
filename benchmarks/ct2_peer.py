"""The peer of ``benchmarks/whole_command.py``: what a CTranslate2 user writes to translate a file with an
export directory's model: sentencepiece in, ``translate_batch`` on length-sorted batches of 64 with fairseq's length
rule (at most a·S + b tokens for a batch whose longest source has S tokens; a = 2, b = 10 as adlnmt's defaults),
CTranslate2's defaults otherwise (its own length normalisation included). With ``--workers N``, CTranslate2's
parallel configuration (docs/parallel.md): N single-thread replicas, every batch submitted at once.

    python benchmarks/ct2_peer.py EXPORT_DIR INPUT OUTPUT --beam 5 --compute-type int8 --threads 2 [--workers 2]
"""

import argparse
import json
from pathlib import Path

import ctranslate2
import sentencepiece as spm

parser = argparse.ArgumentParser(description=__doc__)
for name in ("export", "input", "output"):
    parser.add_argument(name, type=Path)
parser.add_argument("--beam", type=int, default=5)
parser.add_argument("--compute-type", default="default")
parser.add_argument("--threads", type=int, default=2)
parser.add_argument("--workers", type=int, default=1)
args = parser.parse_args()
manifest = json.loads((args.export / "vocab" / "manifest.json").read_text())
vocab = {side: str(args.export / "vocab" / name) for side, name in manifest["spm"].items()}
source, target = spm.SentencePieceProcessor(vocab["src"]), spm.SentencePieceProcessor(vocab["tgt"])
threads = {"inter_threads": args.workers, "intra_threads": 1} if args.workers > 1 else {"intra_threads": args.threads}
translator = ctranslate2.Translator(str(args.export / "ctranslate2"), compute_type=args.compute_type, **threads)
lines = args.input.read_text(encoding="utf-8").splitlines()
pieces = [[*source.encode(line, out_type=str), "</s>"] for line in lines]
order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
outputs = [""] * len(pieces)
batches = [order[start : start + 64] for start in range(0, len(order), 64)]
pending = [translator.translate_batch([pieces[i] for i in batch], beam_size=args.beam, asynchronous=True,
                                      max_decoding_length=2 * max(len(pieces[i]) for i in batch) + 10)
           for batch in batches]  # fmt: skip
for batch, results in zip(batches, pending, strict=True):
    for i, result in zip(batch, results, strict=True):
        outputs[i] = target.decode(result.result().hypotheses[0])
args.output.write_text("".join(line + "\n" for line in outputs), encoding="utf-8")
