"""How ``adlnmt serve`` runs uvicorn so that no client can hold the server: a deadline for each request head (a
connection that has sent none, or a partial one, is closed), request heads bounded (431, answered before the close
rather than lost in a reset), idle keep-alive connections closed, a graceful stop bounded in time, and a second stop
signal that stops at once (uvicorn forces only on a second SIGINT)."""

from __future__ import annotations

import asyncio
import json
import socket
from http import HTTPStatus
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from adlnmt.errors import UserError
from adlnmt.serve.limits import MAX_HEAD_BYTES, ServeOptions


def head_deadline_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection that has not sent a complete request head within ``seconds`` of
    opening or of its previous response, and answering a request head too large to parse (over
    :data:`MAX_HEAD_BYTES`, arriving in parts) with 431 instead of uvicorn's 400, or any other unparsable head with
    400, both as JSON. Either way the connection is closed "lingering": the answer is sent and the sending side
    shut, and what the client still sends is read and dropped for up to ``seconds``, so that the client reads the
    answer instead of a connection reset."""

    class HeadDeadline(H11Protocol):
        lingering = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_deadline()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_head_deadline()

        def _arm_head_deadline(self) -> None:
            self.loop.call_later(seconds, self._head_deadline, self.cycle)

        def _head_deadline(self, cycle_then: Any) -> None:
            """Close the connection when no new request head has arrived since the deadline was set."""
            if self.cycle is cycle_then and not self.transport.is_closing() and not self.lingering:
                self.timeout_keep_alive_handler()  # uvicorn's own close of an idle connection

        def data_received(self, data: bytes) -> None:
            if not self.lingering:
                super().data_received(data)

        def send_400_response(self, msg: str) -> None:
            """uvicorn's answer to a request head h11 cannot parse: 431 when it is too large, else 400."""
            buffered, _ = self.conn.trailing_data
            status, error = (
                (431, f"request head larger than the server's limit of {MAX_HEAD_BYTES:,} bytes")
                if len(buffered) > MAX_HEAD_BYTES
                else (400, "invalid HTTP request")
            )
            body = json.dumps({"error": error}).encode()
            head = (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")  # fmt: skip
            self.transport.write(head.encode("ascii") + body)
            self.lingering = True
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self.loop.call_later(seconds, self.transport.close)

    return HeadDeadline


class BoundedServer(uvicorn.Server):
    """A uvicorn server whose stop takes at most ``bound_s`` seconds, or none after a second SIGTERM or SIGINT:
    then the connections still open are closed (their requests end) and the application is shut down (uvicorn
    skips that on a forced stop, and cancelling requests instead would log their tracebacks)."""

    def __init__(self, config: uvicorn.Config, bound_s: float) -> None:
        super().__init__(config)
        self.bound_s = bound_s

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            self.force_exit = True
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        give_up = loop.call_later(self.bound_s, setattr, self, "force_exit", True)
        try:
            await super().shutdown(sockets)
        finally:
            give_up.cancel()
        if not self.force_exit:
            return
        for connection in list(self.server_state.connections):
            connection.transport.close()  # type: ignore[attr-defined]
        await self.lifespan.shutdown()
        if self.server_state.tasks:
            await asyncio.wait(list(self.server_state.tasks), timeout=self.bound_s)


def server(app: Any, options: ServeOptions) -> BoundedServer:
    """The server of ``app`` on ``options.host:port`` with the deadlines of ``options`` (see the module)."""
    config = uvicorn.Config(
        app,
        host=options.host,
        port=options.port,
        log_level="info",
        access_log=False,
        http=head_deadline_protocol(options.read_timeout_s),
        timeout_keep_alive=max(1, round(options.read_timeout_s)),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
    )
    return BoundedServer(config, options.shutdown_timeout_s)


def listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address of ``host`` on ``port`` (as asyncio's ``create_server`` binds them; port 0:
    one free port), for :meth:`BoundedServer.run`; a UserError naming ``--host``/``--port`` when they cannot be
    bound (a port in use, an address not of this machine, a name that does not resolve), so that this is one
    message and status 2 before the server says it serves, not uvicorn's log line and status 3 after."""
    where = f"--host {host} --port {port}"
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as err:
        raise UserError(f"{where}: cannot listen there ({getattr(err, 'strerror', None) or err})") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(addresses):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:  # the same free port on every address
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
    except OSError as err:
        for sock in sockets:
            sock.close()
        raise UserError(f"{where}: cannot listen there ({err.strerror or err})") from None
    return sockets
