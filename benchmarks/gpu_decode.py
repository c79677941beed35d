"""Decoding speed of one model on a GPU: torch eager vs torch with CUDA graphs (and CTranslate2 where it runs),
beams × batch sizes × precisions, one markdown row per configuration.

    PYTHONPATH=src python3 benchmarks/gpu_decode.py --model MODEL_DIR --src test.de --ref test.en [--out table.md]
    PYTHONPATH=src python benchmarks/gpu_decode.py --model MODEL_DIR --src ... --ref ... --device cpu --quick

Each configuration decodes the whole set once to warm up (on CUDA graphs: the captures; its time is the "first
pass" column) and once timed; peak GPU memory is ``torch.cuda.max_memory_allocated`` over both passes (reset per
configuration); BLEU (sacrebleu) shows that the outputs agree. ``--quick``: fp32, beams 1 and 5, batch 16, the
first 64 sentences (a try on the CPU, where CUDA graphs run their padded path uncaptured).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import gzip
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import sacrebleu
import torch

from adlnmt.errors import UserError
from adlnmt.export.directory import Source
from adlnmt.export.formats import export_model
from adlnmt.inference.ctranslate2_engine import CTranslate2Engine
from adlnmt.inference.cuda_graphs import BUCKETS, Bucket
from adlnmt.inference.search import SearchOptions
from adlnmt.inference.translator import Translator
from adlnmt.store import ExportDir, ModelDir

CT2_TYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # --precisions → CTranslate2's compute type
CT2_LABEL = "CTranslate2" + (f" ({os.environ['CT2_NOTE']})" if os.environ.get("CT2_NOTE") else "")
HEADER = (
    "| engine | precision | beam | batch | sentences/s | first pass s | peak GPU MB | BLEU |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|"
)


def read_lines(path: Path, limit: int | None) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle][:limit]


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(translate: Callable[[], list[str]], device: str) -> tuple[list[str], float, float, float]:
    """Warm-up pass, timed pass → outputs, first-pass seconds, timed seconds, peak GPU MB (0 on the CPU)."""
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    translate()
    synchronize(device)
    first = time.perf_counter() - start
    start = time.perf_counter()
    outputs = translate()
    synchronize(device)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else 0.0
    return outputs, first, seconds, peak


def ctranslate2_unavailable(device: str) -> str | None:
    """Why CTranslate2 cannot decode on ``device`` here, or None."""
    if device.startswith("cuda"):
        try:  # the ctranslate2 4.x wheels (4.8.5 checked) are built against CUDA 12's cuBLAS
            ctypes.CDLL("libcublas.so.12")
        except OSError as error:
            return f"its CUDA build needs libcublas.so.12 (CUDA 12 cuBLAS): {error}"
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return "the ctranslate2 package is not installed"
    return None


def engine_label(graphs: bool, buckets: list[Bucket]) -> str:
    """The torch engine's label; with CUDA graphs, says so where a capture failed (the padded path ran eagerly)."""
    if not graphs:
        return "torch eager"
    if buckets and not buckets[0].memory.final.is_cuda:
        return "torch, padded path of CUDA graphs (CPU: not captured)"
    eager = [b for b in buckets if not b.capture]
    return "torch + CUDA graphs" + (f" (**{len(eager)} of {len(buckets)} buckets eager**)" if eager else "")


def rows(args: argparse.Namespace, lines: list[str], refs: list[str], ct2_export: Path | None) -> Iterator[str]:
    """Per precision: torch eager, torch with CUDA graphs, CTranslate2 (on ``ct2_export`` where it runs)."""

    def row(engine: str, precision: str, beam: int, batch: int, translate: Callable[[], list[str]]) -> str:
        try:
            outputs, first, seconds, peak = timed(translate, args.device)
        except (RuntimeError, UserError) as error:  # one failed configuration (e.g. out of memory) ends no others
            return f"| {engine} | {precision} | {beam} | {batch} | failed: {str(error).splitlines()[0]} | | | |"
        bleu = sacrebleu.corpus_bleu(outputs, [refs]).score
        return (
            f"| {engine} | {precision} | {beam} | {batch} | {len(lines) / seconds:,.0f} | {first:.2f} | "
            f"{peak:,.0f} | {bleu:.2f} |"
        )

    configs = [(beam, batch) for beam in args.beams for batch in args.batch_sizes]
    for precision in args.precisions:
        translator = Translator.load(args.model, device=args.device, precision=precision)
        for graphs in (False, True):
            for beam, batch in configs:
                options = SearchOptions(beam=beam, batch_size=batch, cuda_graphs=graphs)
                line = row("torch", precision, beam, batch, functools.partial(translator.translate, lines, options))
                yield line.replace("torch", engine_label(graphs, BUCKETS.pop(translator.model, [])), 1)
        del translator
        if ct2_export is None:
            continue
        export = ExportDir.load(ct2_export)
        ct2 = Translator.from_export(export, "ctranslate2")  # its CPU engine replaced by one on the device:
        try:
            ct2.engine = CTranslate2Engine(export, 1, args.device.split(":")[0], CT2_TYPES[precision])
        except (RuntimeError, ValueError) as error:
            yield f"| CTranslate2 | {precision} | – | – | unavailable: {str(error).splitlines()[0]} | | | |"
            continue
        for beam, batch in configs:
            translate = functools.partial(ct2.translate, lines, SearchOptions(beam=beam, batch_size=batch))
            yield row(CT2_LABEL, precision, beam, batch, translate)


def export_for_ctranslate2(model_dir: Path, out: Path) -> Path:
    """The model exported for CTranslate2 (fp32 weights; the compute type is chosen at load time) into ``out``."""
    model, data, max_len = ModelDir(model_dir).load_model("best")
    return export_model(Source(model.eval(), data, max_len, model_dir), out, "ctranslate2").path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="model directory")
    parser.add_argument("--src", type=Path, required=True, help="source lines (.gz allowed)")
    parser.add_argument("--ref", type=Path, required=True, help="reference lines (.gz allowed)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--sentences", type=int, default=None, help="only the first N lines")
    parser.add_argument("--quick", action="store_true", help="fp32, batch 16, 64 sentences (a CPU try)")
    parser.add_argument("--out", type=Path, help="also write the table there")
    args = parser.parse_args()
    if args.quick:
        args.precisions, args.batch_sizes, args.sentences = ["fp32"], [16], args.sentences or 64
    lines, refs = read_lines(args.src, args.sentences), read_lines(args.ref, args.sentences)
    if len(lines) != len(refs):
        parser.error(f"{args.src} has {len(lines)} lines but {args.ref} has {len(refs)}")
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    title = f"{args.model}: {len(lines)} sentences of {args.src.name} on {device}, torch {torch.__version__}"
    out = [f"{title}\n", HEADER]
    print(*out, sep="\n", flush=True)
    reason = ctranslate2_unavailable(args.device)
    with tempfile.TemporaryDirectory(prefix="gpu-decode-") as tmp:
        ct2_export = None
        try:
            ct2_export = None if reason else export_for_ctranslate2(args.model, Path(tmp) / "ct2")
        except UserError as error:  # a decoder CTranslate2 has no layers for (RNN, CNN, ...)
            reason = f"the export is refused: {error}"
        if reason is not None:
            out.append(f"| CTranslate2 | – | – | – | unavailable: {reason} | | | |")
            print(out[-1], flush=True)
        for line in rows(args, lines, refs, ct2_export):
            print(line, flush=True)
            out.append(line)
            if args.out:
                args.out.write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
