"""A relay that hands a session's notices to the harness, for a library whose driver keeps
them to itself (awa's and pgqrs's sqlx log them to Rust's tracing, which nothing in
Python reads), and the URL such a driver connects by.

A plan capture reads auto_explain's plans from the notices the server sends the
library's own sessions (the adapter forwards each as a `plan` event, docs/adapters.md).
The relay listens on a unix socket of its own; the library connects to it as if it were
the server; each session is copied byte for byte to the real server and back, and on the
way back every NoticeResponse's message is also handed to `on_notice`. Nothing is
changed: the relay reads the protocol's typed messages (a type byte, a length) only to
find the notices. The library is told to ask for no TLS (sslmode=disable on the unix
socket), so every message it gets is a typed one.

`relayed(config, on_notice)` runs one for a plan capture's worker (and nothing
otherwise); `sqlx_url(config, relay)` is the connection as sqlx takes it, through the
relay where there is one.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import psycopg

from harness.queues.adapters.python import kit

PORT = 5432  # the socket's name only: <folder>/.s.PGSQL.5432
TIMEOUT_S = 10
NOTICE = b"N"
MESSAGE_FIELD = ord("M")


@dataclass
class Relay:
    """Serving, on a thread and event loop of its own (a library may connect from the
    thread that runs the caller's loop, and block it until it has), from `start()` until
    `close()`; `folder` is the libpq-style host to give the library: a directory it makes
    for the socket, and removes (`relayed`'s sits in a temporary folder of its own,
    removed with it)."""

    dsn: str
    on_notice: Callable[[str], None]
    folder: str
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None
    _server: asyncio.AbstractServer | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    def start(self) -> None:
        Path(self.folder).mkdir(mode=0o700)
        path = str(Path(self.folder) / f".s.PGSQL.{PORT}")
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        serving = asyncio.start_unix_server(self._session, path=path)
        self._server = asyncio.run_coroutine_threadsafe(serving, self._loop).result(TIMEOUT_S)

    def close(self) -> None:
        """Its sessions ended, its loop stopped, its socket's folder removed."""
        if self._thread is not None:
            ending = asyncio.run_coroutine_threadsafe(self._end_sessions(), self._loop)
            with contextlib.suppress(Exception):
                ending.result(TIMEOUT_S)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(TIMEOUT_S)
            self._loop.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    async def _end_sessions(self) -> None:
        """Every session's connections closed, so that its copies end on their own."""
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        sessions = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        if sessions:
            await asyncio.wait(sessions, timeout=TIMEOUT_S)

    async def _session(self, client_in: asyncio.StreamReader, client_out: Any) -> None:
        server_in, server_out = await _open_server(self.dsn)
        self._writers |= {client_out, server_out}
        upstream = asyncio.create_task(_copy(client_in, server_out))
        try:
            await _copy_noticing(server_in, client_out, self.on_notice)
        finally:
            for writer in (server_out, client_out):
                writer.close()
            await upstream
            self._writers -= {client_out, server_out}


async def _open_server(dsn: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The server the DSN names, by its first host: a socket directory or a host name."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    host = str(info.get("host") or "/tmp").split(",")[0]
    port = int(str(info.get("port") or PORT).split(",")[0])
    if host.startswith("/"):
        return await asyncio.open_unix_connection(str(Path(host) / f".s.PGSQL.{port}"))
    return await asyncio.open_connection(str(info.get("hostaddr") or host), port)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()


async def _copy_noticing(
    reader: asyncio.StreamReader, writer: Any, on_notice: Callable[[str], None]
) -> None:
    """The server's typed messages, each passed on whole; a notice's text also noted."""
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        while True:
            header = await reader.readexactly(5)
            (length,) = struct.unpack("!I", header[1:])
            body = await reader.readexactly(length - 4)
            if header[:1] == NOTICE:
                on_notice(notice_message(body))
            writer.write(header + body)
            await writer.drain()


def notice_message(body: bytes) -> str:
    """The message (field M) of a NoticeResponse's body: fields of a type byte and a
    null-terminated string, ended by a zero byte."""
    position = 0
    while position < len(body) and body[position] != 0:
        kind = body[position]
        end = body.index(b"\x00", position + 1)
        if kind == MESSAGE_FIELD:
            return body[position + 1 : end].decode("utf-8", "replace")
        position = end + 1
    return ""


@contextlib.contextmanager
def relayed(config: kit.Config, on_notice: Callable[[str], None]) -> Iterator[str | None]:
    """In a plan capture (`explain_options` set), a relay that hands its sessions' notices
    to `on_notice`: its socket's folder; None otherwise."""
    if not config.get("explain_options"):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="tqb-relay-") as folder:
        server = kit.conninfo(config, search_path=False)
        relay = Relay(server, on_notice, str(Path(folder) / "relay"))
        relay.start()
        try:
            yield relay.folder
        finally:
            relay.close()


def sqlx_url(config: kit.Config, relay: str | None = None) -> str:
    """The connection as the URL a library on sqlx takes; `relay`: the socket directory
    of a notice relay instead of the server, with auto_explain in the session (a plan
    capture)."""
    parts = config["connection"]
    host, port = str(parts.get("host") or "localhost").split(",")[0], str(parts.get("port") or 5432)
    query = {
        key: str(parts[key]) for key in ("application_name", "sslmode", "options") if parts.get(key)
    }
    if relay is not None:
        host, port = relay, str(PORT)
        query["sslmode"] = "disable"
        query["options"] = f"{parts.get('options') or ''} {config['explain_options']}".strip()
    netloc = f"{quote(host, safe='')}:{port}"
    if host.startswith("/"):
        netloc, query["host"], query["port"] = "localhost", host, port
    user, password = quote(parts.get("user") or "", safe=""), parts.get("password")
    auth = f"{user}:{quote(password, safe='')}@" if password else f"{user}@" if user else ""
    database = quote(parts.get("dbname") or "", safe="")
    return f"postgres://{auth}{netloc}/{database}?{urlencode(query, quote_via=quote)}"
