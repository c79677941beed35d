"""The ``prepare`` and ``demo-corpus`` subcommands; ``adlnmt.cli`` registers them with ``add_commands``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from adlnmt.bounds import SEED, at_least, flag_type
from adlnmt.data.options import PREPARE_DEFAULTS, PrepareOptions
from adlnmt.data.vocab_from import MODEL_VOCAB_DIR
from adlnmt.errors import DataError, UserError
from adlnmt.flags import add_flags

_positive_int = flag_type(int, at_least(1))
DEMO_FILES = [f"{split}.{side}" for split in ("train", "valid", "test") for side in ("src", "tgt")]  # demo-corpus's


def add_commands(subparsers: Any) -> None:
    """Register ``prepare`` and ``demo-corpus`` on an ``add_subparsers()`` object; each sets ``func`` to its handler."""
    prepare = subparsers.add_parser(
        "prepare", help="train subword models, encode and filter a parallel corpus into a data directory"
    )
    prepare.add_argument("--train-src", help="training source text (plain, .gz or .xz, one per line)")
    prepare.add_argument("--train-tgt", help="training target text, aligned with --train-src")
    prepare.add_argument("--valid-src", help="validation source text")
    prepare.add_argument("--valid-tgt", help="validation target text")
    prepare.add_argument(
        "--train",
        action="append",
        default=[],
        metavar="NAME=SRC,TGT[:WEIGHT]",
        help="a named training corpus (repeatable, instead of --train-src/--train-tgt); WEIGHT (default 1) scales "
        "how often training samples it (adlnmt train --temperature)",
    )
    prepare.add_argument(
        "--valid",
        action="append",
        default=[],
        metavar="NAME=SRC,TGT",
        help="the validation set of the training corpus NAME (repeatable)",
    )
    prepare.add_argument(
        "--target-tags",
        action="store_true",
        help="start every source with its target language's tag, <2en> for a corpus named de-en (one id each)",
    )
    prepare.add_argument("--out", required=True, help="output data directory")
    add_flags(prepare, PrepareOptions, ("vocab_size",))
    sharing = prepare.add_mutually_exclusive_group()
    sharing.add_argument(
        "--joint", dest="joint", action="store_true", default=PrepareOptions.joint, help="one vocabulary (default)"
    )
    sharing.add_argument("--separate", dest="joint", action="store_false", help="a source and a target vocabulary")
    add_flags(prepare, PrepareOptions, ("model_type", "max_len", "max_ratio", "source_markers"))
    prepare.add_argument(
        "--spm-sample",
        type=_positive_int,
        default=1_000_000,
        help="train the subword model(s) on a uniform sample of this many training pairs (default %(default)s)",
    )
    prepare.add_argument(
        "--shard-size",
        type=_positive_int,
        default=1_000_000,
        help="training pairs per shard: a shard ends at the first multiple of 8,192 pairs that reaches it (the "
        "last of a corpus holds the rest) (default %(default)s)",
    )
    prepare.add_argument(
        "--workers", type=_positive_int, default=1, help="encoding processes (default 1; the output is the same)"
    )
    prepare.add_argument("--overwrite", action="store_true", help="replace an existing prepared directory")
    prepare.add_argument("--vocab-from", metavar="MODEL", help="encode with MODEL's sentencepiece models instead of "
                         "training new ones (to fine-tune MODEL: adlnmt train --init-from MODEL)")  # fmt: skip
    prepare.set_defaults(func=cmd_prepare)

    demo = subparsers.add_parser("demo-corpus", help="write a deterministic toy parallel corpus (train/valid/test)")
    demo.add_argument("--out", required=True, help="output directory")
    demo.add_argument(
        "--size",
        type=_positive_int,
        default=12000,
        help="training pairs (default 12000); refused where the files would not fit on the disk (about 100 bytes a "
        "pair) or their generation in the available memory (about 24 bytes a pair)",
    )
    demo.add_argument("--seed", type=flag_type(int, SEED), default=1, help="random seed (default 1)")
    demo.add_argument("--overwrite", action="store_true", help="replace corpus files already in --out")
    demo.set_defaults(func=cmd_demo_corpus)


def cmd_prepare(args: argparse.Namespace) -> int:
    """Run ``prepare`` and print a short summary."""
    from adlnmt.data.prepare import parse_corpus, prepare
    from adlnmt.devices import check_cpu_count

    check_cpu_count("--workers", args.workers)
    if args.vocab_from is not None:  # the model's vocabulary decides these: a flag given would do nothing
        given = [flag for flag, value, default in (("--vocab-size", args.vocab_size, PREPARE_DEFAULTS.vocab_size),
                 ("--separate", args.joint, PREPARE_DEFAULTS.joint),
                 ("--model-type", args.model_type, PREPARE_DEFAULTS.model_type)) if value != default]  # fmt: skip
        if given:
            raise UserError(f"{', '.join(given)} with --vocab-from: the model's vocabulary decides them; leave "
                            f"{'them' if len(given) > 1 else 'it'} out")  # fmt: skip
    manifest = prepare(
        args.train_src,
        args.train_tgt,
        args.valid_src,
        args.valid_tgt,
        args.out,
        corpora=[parse_corpus(text, "--train") for text in args.train],
        valid=[parse_corpus(text, "--valid", weighted=False) for text in args.valid],
        target_tags=args.target_tags,
        spm_sample=args.spm_sample,
        shard_size=args.shard_size,
        workers=args.workers,
        vocab_size=args.vocab_size,
        joint=args.joint,
        model_type=args.model_type,
        max_len=args.max_len,
        max_ratio=args.max_ratio,
        source_markers=args.source_markers,
        overwrite=args.overwrite,
        vocab_from=None if args.vocab_from is None else Path(args.vocab_from) / MODEL_VOCAB_DIR,
    )
    if manifest["joint"]:
        vocab = f"joint {manifest['model_type']} vocabulary of {manifest['src_vocab_size']}"
    else:
        vocab = f"{manifest['model_type']} vocabularies of {manifest['src_vocab_size']} / {manifest['tgt_vocab_size']}"
    print(f"prepared {args.out}: {vocab}")
    train, valid = manifest["splits"]["train"], manifest["splits"]["valid"]
    print(
        f"  train: {train['read']} read, {train['kept']} kept; dropped {train['empty']} empty, "
        f"{train['too_long']} longer than {args.max_len}, {train['bad_ratio']} with ratio above {args.max_ratio}"
    )
    print(
        f"  valid: {valid['read']} read, {valid['kept']} kept; dropped {valid['empty']} empty, "
        f"truncated {valid['truncated']} to {args.max_len}"
    )
    if len(manifest["corpora"]) > 1:
        for name, corpus in manifest["corpora"].items():
            tag = f", tag {corpus['tag']}" if corpus["tag"] else ""
            print(f"  corpus {name}: {corpus['train']['kept']} kept, weight {corpus['weight']:g}{tag}")
    print(f"  {len(manifest['shards']['train'])} training shard(s)")
    return 0


def cmd_demo_corpus(args: argparse.Namespace) -> int:
    """Write the toy corpus and print the file names and sizes. The temporaries a killed run left beside the files
    are removed first (said on stderr), before the free space is checked."""
    import sys
    from pathlib import Path

    from adlnmt.atomic import remove_stale_temporaries
    from adlnmt.data.demo import check_room, write_demo_corpus

    if not args.out:
        raise DataError("no output directory given (--out)")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise DataError("output path exists and is not a directory", out)
    existing = [name for name in DEMO_FILES if (out / name).exists()]
    if existing and not args.overwrite:
        raise DataError(f"already holds {', '.join(existing)}; pass --overwrite to replace them", out)
    for tmp in remove_stale_temporaries([out / name for name in DEMO_FILES]):
        print(f"removed {tmp}, left by a demo-corpus run that was killed", file=sys.stderr)
    check_room(out, args.size, [out / name for name in existing])
    sizes = write_demo_corpus(out, size=args.size, seed=args.seed)
    for split, count in sizes.items():
        print(f"{out / split}.src, {out / split}.tgt: {count} pairs")
    return 0
