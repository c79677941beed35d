"""Exit statuses of commands: a user's error is one clear message on stderr and status 2, never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable

from adlnmt.errors import UserError


def exit_status(command: Callable[[], int]) -> int:
    """Run ``command`` and return its exit status; user errors, interrupts and OS errors become messages."""
    try:
        return command()
    except UserError as err:
        print(err.message_for_user(), file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `adlnmt layers | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("interrupted (the same command resumes training from its last checkpoint, prepare from its last "
              "shard, a distillation from its last chunk)", file=sys.stderr)  # fmt: skip
        return 130
    except OSError as err:  # unwritable output, full disk ...: the user's environment, not a bug
        where = f"{err.filename}: " if err.filename else ""  # never an empty name before the colon
        print(f"error: {where}{err.strerror or err}", file=sys.stderr)
        return 2
