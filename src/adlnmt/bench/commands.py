"""CLI: ``adlnmt bench decode`` (decoding speed per decoder × beam × cached/uncached, and by output length) and
``adlnmt bench train`` (updates/s per preset); both print a table under a machine line and write CSV/JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from adlnmt.errors import UserError
from adlnmt.flags import add_flags, from_flags
from adlnmt.inference.engine import ENGINE_CHOICES
from adlnmt.inference.options import SearchOptions
from adlnmt.presets import PRESET_GROUPS
from adlnmt.store import ModelDir, is_export_dir
from adlnmt.store.atomic import path_flag
from adlnmt.store.names import CONFIG, EXPORT_MANIFEST

SEARCH_FLAGS = ("batch_size", "workers", "length_penalty")  # those of adlnmt translate (SearchOptions) it takes
DEFAULT_BEAMS = "1,4,8,12,16,20"
DEFAULT_LENGTHS = "10,25,50,100,200"
GROUPS_HELP = "; ".join(f"{name} = {' '.join(members)}" for name, members in PRESET_GROUPS.items())
DECODE_EPILOG = f"""\
Preset groups: {GROUPS_HELP}.

A preset is randomly initialised (--seed) at the paper's size or the --d-model/--heads/--d-ff given and decodes
random source ids: one sentence per non-empty --input line with as many ids as the line has words (default:
--sentences synthetic sentences of 6-20 words), each output forced to exactly its source's length. A --model
decodes the --input lines with real search (EOS decides the length). The length sweep forces every output to
exactly L tokens (--lengths) on --sweep-sentences random sources of L words, for presets and models alike.
Times are the fastest of --repeat runs after a warm-up; memory is the peak RSS during the run (CUDA: peak
allocated), also as the increase over the start (+MB).
A CTranslate2 export (adlnmt export --format ctranslate2) run by --engine ctranslate2 or auto is measured
without importing PyTorch, on the CPU with --threads threads (default: the usable cores); the length sweep
needs the PyTorch search and is skipped for it.

examples:
  adlnmt bench decode --preset @table5 @aan --d-model 256 --d-ff 1024 --heads 4 --uncached --no-sweep
  adlnmt bench decode --preset transformer-aan transformer --no-table --sweep-beams 1,4 --uncached
  adlnmt bench decode --model models/t1 --input test.de --beams 1,5
  adlnmt bench decode --model exports/t1-ct2 --engine ctranslate2 --input test.de --beams 1,5 --threads 2
"""


def _int_at_least(low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return value

    return parse


_positive_int = _int_at_least(1)


def int_list(flag: str, text: str) -> list[int]:
    """'1,4,8' → [1, 4, 8] (sorted, without repeats); UserError unless every item is a positive integer."""
    try:
        values = sorted({int(item) for item in text.split(",") if item.strip()})
    except ValueError:
        values = []
    if not values or values[0] < 1:
        raise UserError(f"{flag} expects comma-separated positive integers, got {text!r}")
    return values


def _setup(args: argparse.Namespace, engine: str | None = None) -> tuple[Any, dict[str, Any], Path]:
    """Threads, device, the machine record and the output directory (created). ``engine``: a run on that engine
    alone, without PyTorch (on the CPU, with --threads or the engine's default)."""
    from adlnmt.bench.machine import busy_warning, engine_machine_record, machine_record
    from adlnmt.bench.measure import memory_method

    if engine is None:
        import torch

        from adlnmt.train.device import pick_device

        if args.threads:
            torch.set_num_threads(args.threads)
        device = pick_device(args.device, 0)
        record = machine_record(device)
    else:
        from adlnmt.inference.engines import engine_threads, require

        require(engine)  # its package installed, else a UserError naming the extra
        if args.device not in ("auto", "cpu"):
            raise UserError(f"--device {args.device}: the {engine} engine runs on the CPU (--device auto or cpu)")
        device = "cpu"
        record = engine_machine_record(engine, engine_threads(args.threads or 0))
    machine = {**record, "memory": memory_method(device)}
    warning = busy_warning(machine)
    if warning:
        print(warning, file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return device, machine, out


def _sizes(args: argparse.Namespace) -> dict[str, Any]:
    return {"d_model": args.d_model, "heads": args.heads, "d_ff": args.d_ff, "dropout": args.dropout}


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {key: value for key, value in vars(args).items() if key != "func"}


def _model_labels(paths: list[str]) -> dict[str, str]:
    """Model directory → its name, or the path as given where two names clash."""
    names = [Path(p).name or p for p in paths]
    return {p: (n if names.count(n) == 1 else p) for p, n in zip(paths, names, strict=True)}


def _torch_free_engine(models: list[str], engine: str) -> str | None:
    """``ctranslate2`` when ``engine`` (ctranslate2 or auto) runs every model and each is a CTranslate2 export: a
    run without PyTorch; else None (PyTorch loads the models, or exports them on the fly)."""
    from adlnmt.store.export_dir import EXPORT_MANIFEST, is_export_dir, read_manifest

    def export_format(path: str) -> str | None:
        return read_manifest(Path(path) / EXPORT_MANIFEST)["format"] if is_export_dir(path) else None

    if engine in ("ctranslate2", "auto") and models and all(export_format(p) == "ctranslate2" for p in models):
        return "ctranslate2"
    return None


def _preset_lengths(lines: list[str], count: int, seed: int) -> list[int]:
    """Source lengths of the presets: the input lines' word counts, else ``count`` synthetic ones (seeded)."""
    import numpy as np

    from adlnmt.bench.models import synthetic_lengths

    return [len(line.split()) for line in lines] or synthetic_lengths(count, np.random.default_rng(seed))


def cmd_decode(args: argparse.Namespace) -> int:
    from adlnmt.bench.decode import Decoder, DecodeSettings, length_rows, model_decoder, preset_decoder, table_rows
    from adlnmt.bench.machine import machine_summary
    from adlnmt.bench.models import expand_presets, input_lines, preset_configs
    from adlnmt.bench.report import DECODE_COLUMNS, LENGTH_COLUMNS, plot_lengths
    from adlnmt.inference.engines import check_export_engine, check_model_dir_engine
    from adlnmt.speedups import OFF, speedups_off
    from adlnmt.store.export_dir import read_manifest

    switched_off = [name for name in (args.speedups_off or "").split(",") if name]
    if unknown := set(switched_off) - set(OFF):
        raise UserError(f"--speedups-off: unknown {', '.join(sorted(unknown))}; known: {', '.join(OFF)}")
    presets = expand_presets(args.preset) if args.preset else []
    models = _model_labels(args.model or [])
    if args.engine != "torch" and presets:
        raise UserError(f"--engine {args.engine} decodes trained models (--model), not presets")
    if not presets and not models:
        raise UserError("bench decode needs --model DIR... or --preset NAME...")
    for path in models:  # each runs on --engine, checked before any is measured
        if is_export_dir(path):
            check_export_engine(args.engine, Path(path), read_manifest(Path(path) / EXPORT_MANIFEST)["format"])
        elif ModelDir(path).exists():
            check_model_dir_engine(args.engine, Path(path))
        else:
            raise UserError(
                f"{path}: not a model directory (no {CONFIG}) nor an export directory (no {EXPORT_MANIFEST})"
            )
    table = not args.no_table
    beams, sweep_beams = int_list("--beams", args.beams), int_list("--sweep-beams", args.sweep_beams)
    lengths = [] if args.no_sweep else int_list("--lengths", args.lengths)
    if not table and not lengths:
        raise UserError("--no-table with --no-sweep leaves nothing to measure")
    if models and table and not args.input:
        raise UserError("bench decode --model needs --input FILE (raw source text) for the beam table")
    labels = presets + list(models.values())
    baseline = args.baseline or ("transformer" if "transformer" in labels else labels[0])
    if baseline not in labels:
        raise UserError(f"--baseline {baseline} is not among the decoders ({', '.join(labels)})")
    configs = preset_configs(presets, _sizes(args)) if presets else {}
    lines = input_lines(Path(args.input), args.sentences) if args.input else []
    device, machine, out = _setup(args, _torch_free_engine(list(models), args.engine))
    settings = DecodeSettings(
        beams=beams,
        modes=["cached", "uncached"] if args.uncached else ["cached"],
        search=from_flags(SearchOptions, args, SEARCH_FLAGS),
        repeat=args.repeat,
        device=device,
        lengths=lengths,
        sweep_beams=sweep_beams,
        sweep_sentences=args.sweep_sentences,
        seed=args.seed,
    )

    def decoders() -> Iterator[Decoder]:  # one model in memory at a time
        words = _preset_lengths(lines, args.sentences or 200, args.seed) if configs else []
        for name, config in configs.items():
            yield preset_decoder(name, config, args.vocab, words, args.seed, device, args.precision)
        for path, label in models.items():
            yield model_decoder(label, Path(path), args.checkpoint, device, lines, args.engine, args.precision,
                                args.threads or 0)  # fmt: skip

    results: dict[str, list[dict[str, Any]]] = {"decode": [], "length": []}
    for decoder in decoders():
        with speedups_off(*switched_off):
            if table:
                results["decode"].extend(table_rows(decoder, settings))
            results["length"].extend(length_rows(decoder, settings))
        _save_decode(out, {"machine": machine, "settings": _settings(args), "baseline": baseline, **results})
        del decoder
    if results["length"]:
        plot_lengths(results["length"], out / "length.png", machine_summary(machine))
    note = (f"x base: speed relative to {baseline} at the same beam, mode (and length); "
            "x cache: uncached time / cached time")  # fmt: skip
    _print_tables(machine, [(results["decode"], DECODE_COLUMNS), (results["length"], LENGTH_COLUMNS)], note)
    print(f"\nwritten to {out}/", file=sys.stderr)
    return 0


def _save_decode(out: Path, record: dict[str, Any]) -> None:
    """decode.csv and length.csv for the rows so far, decode.json with everything (after every decoder)."""
    from adlnmt.bench.decode import add_ratios
    from adlnmt.bench.report import write_csv, write_json

    for name in ("decode", "length"):
        add_ratios(record[name], record["baseline"])
        if record[name]:
            write_csv(out / f"{name}.csv", record[name])
    write_json(out / "decode.json", record)


def _print_tables(machine: dict[str, Any], tables: list[tuple[list[dict[str, Any]], list]], note: str = "") -> None:
    """The machine line, an optional note, then each non-empty table."""
    from adlnmt.bench.machine import machine_line
    from adlnmt.bench.report import format_table

    print(machine_line(machine) + (f"\n{note}" if note else ""))
    for rows, columns in tables:
        if rows:
            print(f"\n{format_table(rows, columns)}")


def cmd_train(args: argparse.Namespace) -> int:

    from adlnmt.bench.models import expand_presets, preset_configs, preset_model
    from adlnmt.bench.report import TRAIN_COLUMNS, write_csv, write_json
    from adlnmt.bench.train import measure_training, prepared_batches, random_pairs, training_batches
    from adlnmt.data.dataset import Batch, collate

    options = {**_sizes(args), "batch_tokens": args.batch_tokens, "precision": args.precision, "seed": args.seed}
    configs = preset_configs(expand_presets(args.preset), options)
    if args.batches_from and not args.data:
        raise UserError("--batches-from needs --data (random pairs are always batched before timing)")
    count = args.warmup_updates + args.updates
    if args.data:  # read first: a data error comes before the machine's warnings and the output folder
        from adlnmt.data.data_dir import DataDir

        data = DataDir.load(args.data)
    device, machine, out = _setup(args)
    if args.data:
        train, ids = training_batches(data, args.batch_tokens, count, args.seed)
        src_vocab, tgt_vocab, source = data.src_vocab.size, data.tgt_vocab.size, args.batches_from or "shards"
        if source == "shards":

            def batch(i: int) -> Batch:  # as adlnmt train collates, at the update
                return collate(train, ids[i]).to(device)

        else:
            batch = [collate(train, ix).to(device) for ix in ids].__getitem__
    else:
        split = random_pairs(count, args.batch_tokens, args.vocab, args.seed)
        src_vocab = tgt_vocab = args.vocab
        batch, source = prepared_batches(split, args.batch_tokens, count, args.seed, device).__getitem__, "memory"
    rows: list[dict[str, Any]] = []
    for name, config in configs.items():
        model = preset_model(config, src_vocab, tgt_vocab, args.seed, device)
        print(f"{name}: {model.parameter_count():,} parameters", file=sys.stderr)
        rows.append({**measure_training(name, config, model, batch, count, args.warmup_updates, device),
                     "data": args.data or "synthetic", "batches_from": source})  # fmt: skip
        del model
        write_csv(out / "train.csv", rows)
        write_json(out / "train.json", {"machine": machine, "settings": _settings(args), "train": rows})
    _print_tables(machine, [(rows, TRAIN_COLUMNS)])
    print(f"\nwritten to {out}/", file=sys.stderr)
    return 0


def _common_arguments(parser: argparse.ArgumentParser) -> None:
    sizes = parser.add_argument_group("model size (presets; default: the preset's paper size)")
    sizes.add_argument("--d-model", type=_positive_int, help="model width")
    sizes.add_argument("--heads", type=_positive_int, help="attention heads")
    sizes.add_argument("--d-ff", type=_positive_int, help="feed-forward width (a multiple of --d-model)")
    sizes.add_argument("--dropout", type=float, help="dropout rate (training only)")
    sizes.add_argument("--vocab", type=_positive_int, default=8000, help="vocabulary size of random presets (8000)")
    sizes.add_argument("--seed", type=int, default=1, help="seed of weights, sources and batches (default 1)")
    run = parser.add_argument_group("machine and output")
    run.add_argument("--threads", type=_positive_int, help="torch CPU threads (default: torch's)")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    run.add_argument("--out", default="bench-results", type=path_flag, help="output directory (default bench-results/)")


def add_commands(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="decoding and training speed benchmarks")
    kinds = bench.add_subparsers(dest="bench_command", required=True)
    decode = kinds.add_parser(
        "decode",
        help="decoding speed per decoder × beam (cached and uncached) and by output length",
        epilog=DECODE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = decode.add_argument_group("decoders and workload")
    what.add_argument("--preset", nargs="+", metavar="NAME", help="presets or @groups (random weights)")
    what.add_argument("--model", nargs="+", metavar="DIR", type=path_flag, help="trained model directories")
    what.add_argument(
        "--checkpoint", default="best", type=path_flag, help="checkpoint of --model: best, last, averaged or a path"
    )
    what.add_argument("--input", type=path_flag, help="raw source text, one sentence per line (needed with --model)")
    what.add_argument(
        "--sentences", type=_positive_int, help="use the first N input lines (default all; 200 synthetic)"
    )
    what.add_argument("--beams", default=DEFAULT_BEAMS, help=f"beam sizes, 1 = greedy (default {DEFAULT_BEAMS})")
    what.add_argument("--uncached", action="store_true", help="also run uncached: the whole prefix re-fed every step")
    add_flags(what, SearchOptions, SEARCH_FLAGS)
    what.add_argument("--repeat", type=_positive_int, default=1, help="timed runs per row, fastest kept (default 1)")
    what.add_argument("--precision", choices=("fp32", "bf16", "fp16", "int8"), default="fp32",
                      help="inference precision as in adlnmt translate (int8: CPU dynamic quantisation)")  # fmt: skip
    what.add_argument("--engine", choices=ENGINE_CHOICES, default="torch",
                      help="--model decoding engine, as in adlnmt translate (default torch)")  # fmt: skip
    what.add_argument("--speedups-off", metavar="NAME,...",
                      help="optimisations to switch off (topk_block, preallocate, rows_in_place)")  # fmt: skip
    what.add_argument("--baseline", help="decoder the 'x base' ratios compare with (default transformer, or the first)")
    sweep = decode.add_argument_group("length sweep")
    sweep.add_argument("--lengths", default=DEFAULT_LENGTHS, help=f"output lengths (default {DEFAULT_LENGTHS})")
    sweep.add_argument("--sweep-beams", default="1,4", help="beam sizes of the sweep (default 1,4)")
    sweep.add_argument("--sweep-sentences", type=_positive_int, default=20, help="sentences per length (default 20)")
    sweep.add_argument("--no-sweep", action="store_true", help="skip the length sweep")
    sweep.add_argument("--no-table", action="store_true", help="skip the beam table (sweep only)")
    _common_arguments(decode)
    decode.set_defaults(func=cmd_decode)

    train = kinds.add_parser("train", help="training speed per preset: updates/s, target tokens/s, peak memory")
    train.add_argument("--preset", nargs="+", metavar="NAME", required=True, help="presets or @groups")
    train.add_argument("--data", type=path_flag, help="prepared data directory, read as adlnmt train reads it: "
                       "every shard, in training's batches and order (default: random sentence pairs of 6-20 "
                       "words)")  # fmt: skip
    train.add_argument("--batches-from", choices=("shards", "memory"),
                       help="with --data: shards (default) collates each batch from the memory-mapped shards at its "
                       "update, inside the timed loop, as training does; memory collates the same batches before "
                       "timing (the data path left out)")  # fmt: skip
    train.add_argument("--batch-tokens", type=_positive_int, default=4000, help="padded tokens per batch (4000)")
    train.add_argument("--updates", type=_positive_int, default=20, help="timed updates (default 20)")
    train.add_argument("--warmup-updates", type=_int_at_least(0), default=3, help="untimed updates first (default 3)")
    train.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                       help="autocast as in adlnmt train (bf16: CUDA or CPU; fp16: CUDA only)")  # fmt: skip
    _common_arguments(train)
    train.set_defaults(func=cmd_train)
