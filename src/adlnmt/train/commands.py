"""`adlnmt train`: the trainer behind its flags (:mod:`adlnmt.train.config`)."""

from __future__ import annotations

import argparse

from adlnmt.train.config import add_arguments, from_arguments


def cmd_train(args: argparse.Namespace) -> int:
    from adlnmt.train.trainer import Trainer

    result = Trainer(from_arguments(args)).train()
    return 130 if result["signal"] == "SIGINT" else 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser("train", help="train a model on a prepared data directory (resumable)")
    add_arguments(train)
    train.set_defaults(func=cmd_train)
