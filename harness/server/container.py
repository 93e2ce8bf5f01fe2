"""The container provider: PostgreSQL in a Docker container (testcontainers), the image
`postgres:<major>` of each --pg-version (default `postgres:17`) unless --image names
another, reached by the URL the container gives.

Every failure is one line: no engine, an image that is not here and cannot be pulled, a
container that does not start, exits or never accepts connections. The container is
removed on every path the harness controls (success, error, Ctrl-C, SIGTERM), found by
a label of its own, so even one created an instant before an interrupt goes too.

Ryuk, testcontainers' reaper container, is not used: it is one more image to pull, which
fails where no registry is reachable, and the removal above does its work, but for a
harness killed outright (SIGKILL): its container stays, labelled `tenant-queue-bench.run`,
and `tenant-queue-bench.owner` names the host and process id of the harness that made it
(so its tests tell their own containers from those of other runs on a shared engine).

The server is the container's first process (the image's entrypoint ends in `exec
postgres`, as the official image's and the local stand-in's do), so a fault scenario's
restart and crash are signals to it, as on the embedded server: it ends and the
container with it, and the same container is started again on its data directory.
Its host port is pinned when the container is made, as the embedded server keeps its
port: the engine would publish a restarted container on another, and every connection
of the run names this one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import struct
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from harness.errors import ProviderUnavailable
from harness.server.connections import connect
from harness.server.dsn import redact
from harness.server.kinds import ProviderChoice, Server
from harness.server.processes import crash_recovery, free_port

if TYPE_CHECKING:
    import docker

LABEL = "tenant-queue-bench.run"
OWNER_LABEL = "tenant-queue-bench.owner"
READY_TIMEOUT_S = 120
PORT = 5432  # the server's, inside the container


@contextlib.contextmanager
def start_container(choice: ProviderChoice) -> Iterator[Server]:
    if not docker_engine_answers(os.environ):
        raise ProviderUnavailable(
            "--pg container: no Docker engine answered (DOCKER_HOST, else "
            "/var/run/docker.sock); start one, or use --pg embedded (the default) or "
            "--pg external --dsn URL"
        )
    import docker

    client = docker.from_env()
    run = secrets.token_hex(6)
    container = None
    image = choice.target.image
    try:
        image_id = _local_image(client, image)
        container = _postgres_container(image, run)
        dsn = _started(container, image)
        details = {"image": image, "image_id": image_id, "dsn": redact(dsn)}
        port = container.get_exposed_port(PORT)
        yield Server(
            dsn=dsn,
            provider="container",
            details=details,
            restart=lambda: _restart(container, image, port),
            crash=lambda down_s: _crash(container, image, port, down_s),
        )
    finally:
        _remove_containers(client, run)
        client.close()
        if container is not None:  # testcontainers' own client, which stop() would close
            container.get_docker_client().client.close()


def _local_image(client: docker.DockerClient, image: str) -> str:
    """The image's id, pulled first if it is not on the engine."""
    import docker.errors

    try:
        return str(client.images.get(image).id)
    except docker.errors.ImageNotFound:
        pass
    try:
        return str(client.images.pull(image).id)
    except docker.errors.DockerException as error:
        raise ProviderUnavailable(
            f"--pg container: the image {image} is not on this Docker engine and could not be "
            f"pulled ({_first_line(error)}); pull or build it (a local stand-in for "
            "postgres:<major>: .ci/postgres-image.sh), or name another with --image"
        ) from error


def _postgres_container(image: str, run: str) -> Any:
    """A PostgresContainer, not started, with a password of its own, labelled with the run,
    whose readiness is ours (_wait_until_ready), and with no reaper."""
    from testcontainers.core.config import testcontainers_config

    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:  # testcontainers before 4.15 kept it at the top level
        from testcontainers.postgres import PostgresContainer

    _configure(testcontainers_config)

    class _Postgres(PostgresContainer):  # type: ignore[misc]
        def _connect(self) -> None:
            """testcontainers' own wait execs psql in the container for two minutes, even
            once it has exited; this one connects as the harness will, and stops as soon
            as the container exits, with its last log line."""
            _wait_until_ready(self, image)

    password = secrets.token_hex(12)
    labels = {LABEL: run, OWNER_LABEL: owner()}
    container = _Postgres(image, password=password, driver=None, labels=labels)
    if engine_shares_our_network(os.environ):
        container.with_bind_ports(PORT, free_port("0.0.0.0"))
    return container


def owner(pid: int | None = None) -> str:
    """The owner label's value for the harness process `pid` (default: this one)."""
    return f"{socket.gethostname()}:{pid if pid is not None else os.getpid()}"


def _configure(config: Any) -> None:
    """No reaper; and the engine's published ports on loopback when it shares our network
    (unless TESTCONTAINERS_CONNECTION_MODE says otherwise)."""
    config.ryuk_disabled = True
    if engine_shares_our_network(os.environ) and not os.environ.get(
        "TESTCONTAINERS_CONNECTION_MODE"
    ):
        from testcontainers.core.config import ConnectionMode

        config.connection_mode_override = ConnectionMode.docker_host


def _started(container: Any, image: str) -> str:
    """Start the container; its connection URL once the server accepts connections."""
    import docker.errors

    try:
        container.start()
        return str(container.get_connection_url(driver=None))
    except (docker.errors.DockerException, TimeoutError) as error:
        raise ProviderUnavailable(
            f"--pg container: could not start a container of {image}: {_first_line(error)}"
        ) from error


def _restart(container: Any, image: str, port: int) -> None:
    """`pg_ctl restart -m fast`, as on the embedded server: the fast-shutdown signal
    (SIGINT) to the server, then the same container started again."""
    _stop(container.get_wrapped_container(), [("SIGINT", 30), ("SIGQUIT", 10), ("SIGKILL", 10)])
    _start_again(container, image, port)


def _crash(container: Any, image: str, port: int, down_s: float) -> list[str]:
    """`pg_ctl stop -m immediate`, as on the embedded server: SIGQUIT to the server, which
    ends every backend at once, with no checkpoint; `down_s` later the same container
    started again, its data directory as the crash left it, so that its start replays the
    WAL. What the server's log says of that recovery."""
    wrapped = container.get_wrapped_container()
    before = len(wrapped.logs())
    _stop(wrapped, [("SIGQUIT", 10), ("SIGKILL", 10)])
    time.sleep(down_s)
    _start_again(container, image, port)
    return crash_recovery(wrapped.logs()[before:].decode(errors="replace"))


def _stop(wrapped: Any, steps: list[tuple[str, float]]) -> None:
    """Each signal in turn to the container's first process, the server, waiting its
    grace in seconds, until the container has exited."""
    import docker.errors

    for signal_name, grace in steps:
        with contextlib.suppress(docker.errors.APIError):  # it exited a moment before
            wrapped.kill(signal=signal_name)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            wrapped.reload()
            if wrapped.status != "running":
                return
            time.sleep(0.05)


def _start_again(container: Any, image: str, port: int) -> None:
    """The stopped container started again, once its server accepts connections, on the
    host port the run's connections name."""
    import docker.errors

    try:
        container.get_wrapped_container().start()
    except docker.errors.DockerException as error:
        raise ProviderUnavailable(
            f"--pg container: could not start the container of {image} again: {_first_line(error)}"
        ) from error
    _wait_until_ready(container, image)
    now = container.get_exposed_port(PORT)
    if now != port:
        raise ProviderUnavailable(
            f"--pg container: the container of {image} started again on port {now}, not "
            f"{port}, which the run connects to: the engine does not share this host's "
            "network, where the harness cannot pin the port"
        )


def _wait_until_ready(container: Any, image: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    wrapped = container.get_wrapped_container()
    while time.monotonic() < deadline:
        wrapped.reload()
        if wrapped.status in ("exited", "dead"):
            raise ProviderUnavailable(
                f"--pg container: the container of {image} exited at start: "
                f"{_last_log_line(wrapped)}"
            )
        try:
            with connect(container.get_connection_url(driver=None), connect_timeout=2):
                return
        except (psycopg.OperationalError, TimeoutError, ConnectionError):
            # It may stop between the status read and the connection: a TimeoutError, or
            # testcontainers' ConnectionError for a port no longer mapped. The next status
            # read says it exited.
            time.sleep(0.2)
    raise ProviderUnavailable(
        f"--pg container: the server in {image} did not accept connections in "
        f"{READY_TIMEOUT_S} s: {_last_log_line(wrapped)}"
    )


def _remove_containers(client: docker.DockerClient, run: str) -> None:
    """Every container of this run, running or not, with its volumes. Never raises."""
    import docker.errors

    with contextlib.suppress(docker.errors.DockerException):
        for container in client.containers.list(all=True, filters={"label": f"{LABEL}={run}"}):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)


def _last_log_line(container: Any) -> str:
    lines = container.logs(tail=20).decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else "no output"


def _first_line(error: Exception) -> str:
    """The engine's own explanation where it gave one, without the SDK's HTTP preamble."""
    text = getattr(error, "explanation", None) or str(error)
    lines = str(text).strip().splitlines()
    return lines[0] if lines else type(error).__name__


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
    except (OSError, ValueError, AttributeError):  # AttributeError: no AF_UNIX (Windows)
        return False
    return True  # ssh:// and other schemes: let testcontainers try and say what it finds


def engine_shares_our_network(env: Mapping[str, str]) -> bool:
    """Is the engine a local one in this very network namespace? Then the ports it
    publishes are on our loopback, even where a /.dockerenv makes testcontainers believe
    we run in a container of another engine and connect through a gateway address."""
    host = env.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(host.removeprefix("unix://"))
            credentials = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        engine_pid = struct.unpack("3i", credentials)[0]
        ours = Path("/proc/self/ns/net").readlink()
        return engine_pid > 0 and Path(f"/proc/{engine_pid}/ns/net").readlink() == ours
    except (OSError, AttributeError):  # no such socket, another system, another namespace
        return False


def _pings(conn: socket.socket) -> bool:
    conn.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
    status_line = conn.recv(64).split(b"\r\n", 1)[0]
    return status_line.startswith(b"HTTP/1.") and b" 200" in status_line
