"""``adlnmt serve``: load a model and serve it over HTTP with uvicorn (see :mod:`adlnmt.serve`)."""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType

from adlnmt.errors import UserError
from adlnmt.inference.translator import PRECISIONS
from adlnmt.serve.limits import ENGINES, ServeOptions


def options_from(args: argparse.Namespace) -> ServeOptions:
    return ServeOptions(
        model=args.model,
        host=args.host,
        port=args.port,
        checkpoint=args.checkpoint,
        precision=args.precision,
        engine=args.engine,
        device=args.device,
        threads=args.threads,
        max_batch_sentences=args.max_batch_sentences,
        max_wait_ms=args.max_wait_ms,
        max_body_bytes=args.max_body_bytes,
        max_sentences=args.max_sentences,
        max_chars=args.max_chars,
        max_beam=args.max_beam,
        request_timeout_s=args.request_timeout,
        max_queue_sentences=args.max_queue_sentences,
        max_request_cost=args.max_request_cost,
        read_timeout_s=args.read_timeout,
        allowed_hosts=tuple(host.strip() for host in args.allowed_hosts.split(",") if host.strip()),
    )


def cmd_serve(args: argparse.Namespace) -> int:
    options = options_from(args)
    try:
        from adlnmt.serve.app import create_app
        from adlnmt.serve.server import server
    except ImportError as err:
        raise UserError(f"adlnmt serve needs the 'serve' extra ({err.name} is missing): "
                        "pip install 'adlnmt[serve]'") from None  # fmt: skip
    app = create_app(options)  # loads the model: a bad directory is an error before the port is bound
    print(f"serving {options.model} on http://{options.host}:{options.port}/ (API page: /docs)", file=sys.stderr)
    # uvicorn catches SIGTERM/SIGINT: it stops accepting, finishes the requests in flight (within
    # options.shutdown_timeout_s; a second signal: at once), then raises the signal again for the handler that was
    # there before: these, so that a stop exits with 0 after SIGTERM and 130 after Ctrl-C, without a traceback.
    previous = {number: signal.signal(number, _stopped) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        server(app, options).run()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 0


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(130 if signum == signal.SIGINT else 0)


def add_commands(commands: argparse._SubParsersAction) -> None:
    defaults = ServeOptions(model="")
    serve = commands.add_parser("serve", help="serve a model over HTTP: JSON API, web page, batching across requests")
    serve.add_argument("--model", required=True, help="model directory, or an export directory (adlnmt export)")
    serve.add_argument("--host", default=defaults.host, help="address to listen on (default %(default)s)")
    serve.add_argument(
        "--allowed-hosts",
        default="",
        help="comma-separated Host header names answered, * for any (default: --host, localhost, 127.0.0.1, ::1)",
    )
    serve.add_argument("--port", type=int, default=defaults.port, help="TCP port (default %(default)s)")
    serve.add_argument("--checkpoint", default=defaults.checkpoint, help="best, last, averaged or a .safetensors path")
    serve.add_argument("--precision", default=defaults.precision, choices=PRECISIONS, help="as in adlnmt translate")
    serve.add_argument("--engine", default=defaults.engine, choices=ENGINES, help="as in adlnmt translate")
    serve.add_argument("--device", default=defaults.device, help="cpu or cuda")
    serve.add_argument("--threads", type=int, default=defaults.threads, help="engine CPU threads (0: its choice)")
    serve.add_argument(
        "--max-batch-sentences",
        type=int,
        default=defaults.max_batch_sentences,
        help="most sentences searched together across requests (default %(default)s; 1: no batching)",
    )
    serve.add_argument(
        "--max-wait-ms",
        type=float,
        default=defaults.max_wait_ms,
        help="how long a batch waits for more requests (default %(default)s)",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        default=defaults.max_body_bytes,
        help="largest request body, else 413 (default %(default)s)",
    )
    serve.add_argument(
        "--max-sentences",
        type=int,
        default=defaults.max_sentences,
        help="most sentences per request, else 413 (default %(default)s)",
    )
    serve.add_argument(
        "--max-chars",
        type=int,
        default=defaults.max_chars,
        help="longer sentences are cut, with a warning in the response (default %(default)s)",
    )
    serve.add_argument(
        "--max-beam", type=int, default=defaults.max_beam, help="largest beam, else 422 (default %(default)s)"
    )
    serve.add_argument(
        "--max-request-cost",
        type=int,
        default=defaults.max_request_cost,
        help="most work per request, beam × source pieces, else 413 (default %(default)s)",
    )
    serve.add_argument(
        "--read-timeout",
        type=float,
        default=defaults.read_timeout_s,
        help="seconds a client has to send a request head, then its body (else 408), or may stay idle "
        "(default %(default)s)",
    )
    serve.add_argument(
        "--request-timeout",
        type=float,
        default=defaults.request_timeout_s,
        help="seconds before a request gets 504 and its search stops (default %(default)s)",
    )
    serve.add_argument(
        "--max-queue-sentences",
        type=int,
        default=defaults.max_queue_sentences,
        help="sentences waiting for the search, else 503 with Retry-After (default %(default)s)",
    )
    serve.set_defaults(func=cmd_serve)
