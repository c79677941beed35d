"""Errors a user can cause (bad input); the CLI prints them as one message and exits with status 2."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """Base of every error caused by input, configuration or files, not by a bug."""

    def message_for_user(self) -> str:
        """What the command line prints (subclasses with more to show, e.g. an ADL caret, override it)."""
        return f"error: {self}"


class DataError(UserError, ValueError):
    """A fault in a data file, located as ``file:line: message`` (line is 1-based)."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path or ""
        if self.path and self.line is not None:
            where += f":{self.line}"
        return f"{where}: {self.message}" if where else self.message
