"""CLI: ``adlnmt distill --data DIR --model TEACHER [--model ...] --out DIR [search flags]``."""

from __future__ import annotations

import argparse

from adlnmt.bounds import at_least, flag_type
from adlnmt.exits import said_on_sigterm
from adlnmt.flags import add_flags, from_flags
from adlnmt.inference.commands import add_model_arguments
from adlnmt.inference.options import SearchOptions
from adlnmt.store.atomic import path_flag

# the search flags of `adlnmt translate` that distillation takes (it keeps the 1-best: no n-best, sampling, prefixes)
SEARCH_FLAGS = ("beam", "batch_size", "length_penalty", "max_len_ratio", "max_len_extra", "workers")


def cmd_distill(args: argparse.Namespace) -> int:
    from adlnmt.distill.kd import distill, teacher_record
    from adlnmt.inference.commands import load_translator

    options = from_flags(SearchOptions, args, SEARCH_FLAGS)
    translator = load_translator(args, options)
    teacher = teacher_record(args.model, args.checkpoint or [], translator, args.precision, args.device, args.combine)
    with said_on_sigterm(f"distillation stopped; {args.out} keeps its translated chunks and the same command "
                         "resumes from them"):  # fmt: skip
        distill(args.data, args.out, translator, teacher, options, args.chunk_size)
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "distill",
        help="sequence-level knowledge distillation: a teacher translates a data directory's training source into "
        "a new data directory (same vocabularies) for students",
        description="Translate the training source of a prepared data directory with a teacher (a model, an "
        "ensemble or an export, on any engine; beam 5 by default) and write a new data directory whose training "
        "targets are the teacher's 1-best translations, with the same vocabularies, validation split and training "
        "source, and the provenance in its manifest (distilled: teacher, checkpoint, search settings, digests). "
        "Interrupted, the same command resumes from the last committed chunk. See docs/training.md (Distillation).",
    )
    parser.add_argument(
        "--data", required=True, type=path_flag, help="the prepared data directory whose training source to translate"
    )
    parser.add_argument(
        "--out", required=True, type=path_flag, help="the new data directory (or an unfinished one to resume)"
    )
    add_model_arguments(parser)
    add_flags(parser, SearchOptions, SEARCH_FLAGS)
    parser.add_argument(
        "--chunk-size",
        type=flag_type(int, at_least(1)),
        default=1000,
        help="sentences translated and committed at a time: what an interruption can lose (default %(default)s)",
    )
    parser.set_defaults(func=cmd_distill)
