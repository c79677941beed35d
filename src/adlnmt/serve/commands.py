"""``adlnmt serve``: load a model and serve it over HTTP with uvicorn (see :mod:`adlnmt.serve`)."""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType

from adlnmt.devices import checked_device
from adlnmt.errors import UserError
from adlnmt.flags import add_flags, from_flags
from adlnmt.serve.limits import ServeOptions


def cmd_serve(args: argparse.Namespace) -> int:
    options = from_flags(ServeOptions, args)
    checked_device(options.device)  # before the model loads
    try:
        from adlnmt.serve.app import create_app
        from adlnmt.serve.server import listening_sockets, server
    except ImportError as err:
        raise UserError(f"adlnmt serve needs the 'serve' extra ({err.name} is missing): "
                        "pip install 'adlnmt[serve]'") from None  # fmt: skip
    app = create_app(options)  # loads the model: a bad directory is an error before the port is bound
    sockets = listening_sockets(options.host, options.port)  # a port in use: one message, status 2
    port = sockets[0].getsockname()[1]  # --port 0: the free port chosen
    host = f"[{options.host}]" if ":" in options.host else options.host
    print(f"serving {options.model} on http://{host}:{port}/ (API page: /docs)", file=sys.stderr)
    if note := options.loopback_only_note():
        print(note, file=sys.stderr)
    # uvicorn catches SIGTERM/SIGINT: it stops accepting, finishes the requests in flight (within
    # options.shutdown_timeout_s; a second signal: at once), then raises the signal again for the handler that was
    # there before: these, so that a stop exits with 0 after SIGTERM and 130 after Ctrl-C, without a traceback.
    previous = {number: signal.signal(number, _stopped) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        server(app, options).run(sockets)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 0


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(130 if signum == signal.SIGINT else 0)


def add_commands(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="serve a model over HTTP: JSON API, web page, batching across requests")
    add_flags(serve, ServeOptions, bounded=False)  # ServeOptions checks the ranges: every problem in one message
    serve.set_defaults(func=cmd_serve)
