"""Engines side by side: PyTorch / ONNX Runtime / CTranslate2, fp32 and int8, beams 1 and 5.

    .venv/bin/python benchmarks/export_speed.py --model DIR [DIR ...] --src test.de --ref test.en [--threads 2]

Every model is exported once per engine and precision (not timed), then every row runs in a fresh process:
start-up (loading the model or export directory), sentences/s over the whole input, BLEU (sacreBLEU) and the
process's peak RSS. Rows an engine cannot run (CTranslate2 and non-Transformer ADL) are reported as refused.
The `-workers` rows search `--threads` batches at a time on one thread each (`--workers`: torch's and ONNX
Runtime's forked processes, whose peak memory is the parent's only; CTranslate2's replicas). The `torch-compile` row
is the PyTorch engine with `torch.compile(decode_step, dynamic=True)` and key/value caches grown by concatenation
(preallocated buffers recompile at every growth); its compilation is timed apart, on a warm-up pass over the input,
as `compile_s`. `--rows torch-fp32,ctranslate2-fp32` runs a subset.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROWS = [("torch", "fp32"), ("torch", "int8"), ("onnxruntime", "fp32"), ("onnxruntime", "int8"),
        ("ctranslate2", "fp32"), ("ctranslate2", "int8"), ("torch-workers", "fp32"), ("torch-workers", "int8"),
        ("onnxruntime-workers", "fp32"), ("onnxruntime-workers", "int8"), ("ctranslate2-workers", "fp32"),
        ("ctranslate2-workers", "int8"), ("torch-compile", "fp32")]  # fmt: skip
TORCH_ROWS = ("torch", "torch-compile")  # the PyTorch engine on the model directory (and their -workers rows)
WORKERS = "-workers"  # a row's suffix: the engine with --workers THREADS, single-thread workers


def read(path: Path) -> list[str]:
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM). Not ru_maxrss: Linux carries the RSS a process had before
    ``exec`` into it, so a row would report at least its parent's size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_row(args: argparse.Namespace) -> None:
    """One measurement in this process; prints one JSON line."""
    import torch

    from adlnmt.inference.search import SearchOptions
    from adlnmt.inference.translator import Translator
    from adlnmt.metrics import score

    torch.set_num_threads(args.threads)
    compiled = args.engine == "torch-compile"
    started = time.perf_counter()
    base = args.engine.removesuffix(WORKERS)
    engine = "torch" if base in TORCH_ROWS else base
    workers = args.threads if args.engine.endswith(WORKERS) else 1
    options = SearchOptions(beam=args.beam, batch_size=64, workers=workers)
    translator = Translator.load(args.row_model, precision=args.precision, engine=engine, options=options,
                                 threads=args.threads)  # fmt: skip
    startup = time.perf_counter() - started
    lines, refs = read(Path(args.src))[: args.sentences], read(Path(args.ref))[: args.sentences]
    found: dict[str, float] = {}
    if compiled:
        from adlnmt.speedups import SPEEDUPS

        SPEEDUPS.preallocate = SPEEDUPS.rows_in_place = False
        assert translator.model is not None
        translator.model.decode_step = torch.compile(translator.model.decode_step, dynamic=True)  # type: ignore[method-assign]
        started = time.perf_counter()
        translator.translate(lines, options)
        found["compile_s"] = time.perf_counter() - started
    started = time.perf_counter()
    hyps = translator.translate(lines, options)
    seconds = time.perf_counter() - started
    bleu = score(hyps, refs, ["bleu"])["bleu"]
    peak_mb = peak_rss_mb()
    print(json.dumps({"startup_s": startup, **found, "sentences_per_s": len(lines) / seconds, "bleu": bleu,
                      "peak_mb": peak_mb}))  # fmt: skip


def export_all(model: Path, out: Path) -> dict[tuple[str, str], Path | None]:
    """The directory each row loads (the model itself for torch), or None when the export is refused."""
    from adlnmt.errors import UserError
    from adlnmt.export.directory import Source
    from adlnmt.export.formats import export_model
    from adlnmt.inference.engine import CAPABILITIES
    from adlnmt.store import ModelDir

    targets: dict[tuple[str, str], Path | None] = {}
    for engine, precision in ROWS:
        base = engine.removesuffix(WORKERS)
        if base in TORCH_ROWS:
            targets[engine, precision] = model
            continue
        directory = out / f"{model.name}-{base}-{precision}"  # a -workers row runs the engine's own export
        try:
            if not directory.is_dir():
                loaded, data, max_len = ModelDir(model).load_model("best")
                quantize = "int8" if precision == "int8" else "none"
                export_format = CAPABILITIES[base].export_format
                assert export_format is not None
                export_model(Source(loaded.eval(), data, max_len, model), directory, export_format, quantize)
            targets[engine, precision] = directory
        except UserError as err:
            print(f"{model.name} {engine}: {err}", file=sys.stderr)
            targets[engine, precision] = None
    return targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", nargs="+", default=[])
    parser.add_argument("--src", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--beams", default="1,5")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--out", default="benchmarks/runs/export_speed")
    parser.add_argument("--rows", help="ENGINE-PRECISION,... (default: every row)")
    parser.add_argument("--row-model", help=argparse.SUPPRESS)
    parser.add_argument("--engine", default="torch", help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    parser.add_argument("--beam", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row_model:
        run_row(args)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in map(Path, args.model):
        for (engine, precision), target in export_all(model, out).items():
            if args.rows and f"{engine}-{precision}" not in args.rows.split(","):
                continue
            for beam in map(int, args.beams.split(",")):
                row = {"model": model.name, "engine": engine, "precision": precision, "beam": beam}
                if target is not None:
                    command = [sys.executable, __file__, "--row-model", str(target), "--engine", engine,
                               "--precision", precision, "--beam", str(beam), "--src", args.src, "--ref", args.ref,
                               "--threads", str(args.threads), "--sentences", str(args.sentences)]  # fmt: skip
                    found = subprocess.run(command, capture_output=True, text=True, check=True).stdout
                    row.update(json.loads(found.splitlines()[-1]))
                print(json.dumps(row), flush=True)
                rows.append(row)
    (out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
