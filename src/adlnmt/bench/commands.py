"""CLI: adlnmt bench."""

from __future__ import annotations

import argparse


def add_commands(commands: argparse._SubParsersAction) -> None:
    commands.add_parser("bench", help="(under construction)")
