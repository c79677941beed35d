"""Exit statuses of commands: a user's error is one clear message on stderr and status 2, never a traceback."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

from adlnmt.errors import UserError

RESUMES = {
    "train": "the same command resumes training from its last checkpoint",
    "prepare": "the same command resumes from its last shard",
    "distill": "the same command resumes from its last chunk",
    "experiment": "the same command resumes the grid: finished runs are skipped, interrupted ones resume",
}
"""What re-running a command after Ctrl-C does, for the commands that resume; the others start over."""


def exit_status(command: Callable[[], int], name: str | None = None) -> int:
    """Run ``command`` (the command ``name``, e.g. ``train``) and return its exit status; user errors, interrupts
    and OS errors become messages (an interrupt says how the command resumes, when it does: :data:`RESUMES`)."""
    try:
        return command()
    except UserError as err:
        print(err.message_for_user(), file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `adlnmt layers | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        resumes = RESUMES.get(name or "")
        print(f"interrupted ({resumes})" if resumes else "interrupted", file=sys.stderr)
        return 130
    except OSError as err:  # unwritable output, full disk ...: the user's environment, not a bug
        where = f"{err.filename}: " if err.filename else ""  # never an empty name before the colon
        print(f"error: {where}{err.strerror or err}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def said_on_sigterm(what: str) -> Iterator[None]:
    """The body runs with a SIGTERM handler that says ``SIGTERM: {what}`` on stderr, then ends the process by the
    signal as it would have ended without the handler (status -15 to a parent, 143 in a shell): for a long command,
    to say what the stop leaves (committed work the same command resumes; nothing written). Processes forked
    meanwhile end silently; off the main thread (a library call) nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()

    def stop(number: int, frame: object) -> None:
        if os.getpid() == owner:
            print(f"SIGTERM: {what}", file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
