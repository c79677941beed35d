"""``adlnmt export``: write a trained model as ONNX graphs or a CTranslate2 model (see :mod:`adlnmt.export`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from adlnmt.bounds import at_least, flag_type
from adlnmt.flags import OneModel
from adlnmt.store.atomic import path_flag
from adlnmt.store.export_dir import FORMATS, QUANTIZATIONS

HF_MARIAN = "hf-marian"  # a Hugging Face MarianMT directory (adlnmt.interop.hf_export), not an export for --engine


def cmd_export(args: argparse.Namespace) -> int:
    import torch

    from adlnmt.devices import check_cpu_count
    from adlnmt.export.directory import Source
    from adlnmt.export.formats import export_model
    from adlnmt.inference.engines import engine_for
    from adlnmt.store import ModelDir

    check_cpu_count("--threads", args.threads)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.format == HF_MARIAN:
        from adlnmt.interop.hf_export import export_marian

        export_marian(args.model, args.out, args.checkpoint, args.quantize)
        print(f"exported {args.model} ({args.checkpoint}) as a Hugging Face MarianMT directory {args.out}")
        return 0
    started = time.perf_counter()
    model_dir = Path(args.model)
    model, data, max_len = ModelDir(model_dir).load_model(args.checkpoint)
    export = export_model(Source(model.eval(), data, max_len, model_dir), Path(args.out), args.format, args.quantize)
    seconds = time.perf_counter() - started
    print(f"exported {model_dir} ({args.checkpoint}) as {args.format}, quantize {args.quantize}, to {export.path} "
          f"in {seconds:.1f} s; translate with --model {export.path} --engine {engine_for(export)}")  # fmt: skip
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser(
        "export", help="export a trained model to ONNX or CTranslate2 (for --engine), or to Hugging Face MarianMT"
    )
    export.add_argument("--model", required=True, action=OneModel, type=path_flag, help="model directory")
    export.add_argument("--format", required=True, choices=(*FORMATS, HF_MARIAN), help="onnx, ctranslate2 or hf-marian")
    export.add_argument("--out", required=True, type=path_flag, help="export directory to write")
    export.add_argument(
        "--checkpoint", default="best", type=path_flag, help="best, last, averaged or a .safetensors path"
    )
    export.add_argument("--quantize", default="none", choices=QUANTIZATIONS, help="int8: dynamic int8 weights")
    export.add_argument(
        "--threads", type=flag_type(int, at_least(0)), default=0, help="intra-op threads while exporting (0: default)"
    )
    export.set_defaults(func=cmd_export)
