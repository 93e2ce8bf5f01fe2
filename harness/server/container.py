"""The container provider: testcontainers running the postgres:17 image."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, Mapping

from harness.errors import ProviderUnavailable
from harness.server.kinds import CONTAINER_IMAGE, ProviderChoice, Server


@contextlib.contextmanager
def start_container(choice: ProviderChoice) -> Iterator[Server]:
    container = _start_container()
    try:
        host = container.get_container_host_ip()
        port = container.get_exposed_port(5432)
        dsn = f"postgresql://test:test@{host}:{port}/test"
        yield Server(dsn=dsn, provider="container", details={"image": CONTAINER_IMAGE})
    finally:
        container.stop()


def _start_container():  # type: ignore[no-untyped-def]
    if not docker_engine_answers(os.environ):
        raise ProviderUnavailable(
            "--pg container: no Docker engine answered; use --pg embedded (the default) "
            "or --pg external --dsn URL"
        )
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:  # testcontainers before 4.15 kept it at the top level
        from testcontainers.postgres import PostgresContainer
    return PostgresContainer(CONTAINER_IMAGE, driver=None).start()


def docker_engine_answers(env: Mapping[str, str]) -> bool:
    """Does the engine at DOCKER_HOST (default: the local socket) answer its ping?

    Asked directly rather than through the Docker SDK, which leaves its socket open
    when the engine is absent.
    """
    host = env.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    scheme, _, where = host.partition("://")
    try:
        if scheme == "unix":
            conn: socket.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(5)
            with conn:
                conn.connect(where)
                return _pings(conn)
        if scheme == "tcp":
            name, _, port = where.rstrip("/").rpartition(":")
            with socket.create_connection((name, int(port)), timeout=5) as conn:
                return _pings(conn)
    except (OSError, ValueError):
        return False
    return True  # ssh:// and other schemes: let testcontainers try and say what it finds


def _pings(conn: socket.socket) -> bool:
    conn.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
    status_line = conn.recv(64).split(b"\r\n", 1)[0]
    return status_line.startswith(b"HTTP/1.") and b" 200" in status_line
