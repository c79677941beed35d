"""CLI: adlnmt experiment."""

from __future__ import annotations

import argparse


def add_commands(commands: argparse._SubParsersAction) -> None:
    commands.add_parser("experiment", help="(under construction)")
