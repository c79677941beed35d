"""The peer of ``benchmarks/whole_command.py``: what a CTranslate2 user writes to translate a file with an
export directory's model: sentencepiece in, ``translate_batch`` on length-sorted batches of 64 with fairseq's length
rule (at most a·S + b tokens for a batch whose longest source has S tokens; a = 2, b = 10 as adlnmt's defaults),
CTranslate2's defaults otherwise (its own length normalisation included).

    python benchmarks/ct2_peer.py EXPORT_DIR INPUT OUTPUT --beam 5 --compute-type int8 --threads 2
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
args = parser.parse_args()
manifest = json.loads((args.export / "vocab" / "manifest.json").read_text())
vocab = {side: str(args.export / "vocab" / name) for side, name in manifest["spm"].items()}
source, target = spm.SentencePieceProcessor(vocab["src"]), spm.SentencePieceProcessor(vocab["tgt"])
translator = ctranslate2.Translator(str(args.export / "ctranslate2"), compute_type=args.compute_type,
                                   intra_threads=args.threads)  # fmt: skip
lines = args.input.read_text(encoding="utf-8").splitlines()
pieces = [[*source.encode(line, out_type=str), "</s>"] for line in lines]
order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
outputs = [""] * len(pieces)
for start in range(0, len(order), 64):
    batch = order[start : start + 64]
    longest = max(len(pieces[i]) for i in batch)
    results = translator.translate_batch([pieces[i] for i in batch], beam_size=args.beam,
                                         max_decoding_length=2 * longest + 10)  # fmt: skip
    for i, result in zip(batch, results, strict=True):
        outputs[i] = target.decode(result.hypotheses[0])
args.output.write_text("".join(line + "\n" for line in outputs), encoding="utf-8")
