from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from harness.errors import HarnessError, ProviderUnavailable
from harness.server.container import docker_engine_answers
from harness.server.external import redact
from harness.server.kinds import ServerOptions
from harness.server.providers import choose_provider, open_server


def test_embedded_is_the_default() -> None:
    assert choose_provider(ServerOptions(), {}).kind == "embedded"


def test_a_dsn_alone_means_external() -> None:
    choice = choose_provider(ServerOptions(dsn="postgresql://u@h/db"), {})
    assert (choice.kind, choice.dsn) == ("external", "postgresql://u@h/db")


def test_external_may_come_from_pg_variables() -> None:
    choice = choose_provider(
        ServerOptions("external", allow_version_mismatch=True), {"PGHOST": "db.internal"}
    )
    assert (choice.kind, choice.dsn, choice.allow_version_mismatch) == ("external", "", True)


def test_external_without_any_server_is_refused() -> None:
    with pytest.raises(HarnessError, match="needs --dsn URL or the PG\\* variables"):
        choose_provider(ServerOptions("external"), {})


def test_a_dsn_with_another_provider_is_refused() -> None:
    with pytest.raises(HarnessError, match="--dsn goes with --pg external, not --pg embedded"):
        choose_provider(ServerOptions("embedded", "postgresql://h/db"), {})


def test_an_unknown_provider_lists_the_allowed_ones() -> None:
    with pytest.raises(HarnessError, match="allowed: embedded, container, external"):
        choose_provider(ServerOptions("docker"), {})


def test_redact_drops_the_password() -> None:
    shown = redact("postgresql://alice:s3cret@db.example:5433/queue")
    assert "s3cret" not in shown
    assert "alice" in shown and "5433" in shown


def test_container_without_docker_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    choice = choose_provider(ServerOptions("container"), {})
    with pytest.raises(ProviderUnavailable, match="no Docker engine answered"), open_server(choice):
        pass


def test_an_image_means_the_container_provider() -> None:
    choice = choose_provider(ServerOptions(image="postgres:17.10"), {})
    assert (choice.kind, choice.target.image) == ("container", "postgres:17.10")
    assert choose_provider(ServerOptions("container"), {}).target.image == "postgres:17"
    with pytest.raises(HarnessError, match="--image goes with --pg container, not --pg embedded"):
        choose_provider(ServerOptions("embedded", image="postgres:17"), {})


def test_an_unreachable_external_server_is_one_clear_error() -> None:
    choice = choose_provider(ServerOptions(dsn="host=/nonexistent-socket-dir port=1 dbname=x"), {})
    with (
        pytest.raises(ProviderUnavailable, match="cannot connect to the external server"),
        open_server(choice),
    ):
        pass


def test_the_docker_probe_reads_a_ping_answer(tmp_path: Path) -> None:
    path = str(tmp_path / "docker.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")

    thread = threading.Thread(target=answer)
    thread.start()
    try:
        assert docker_engine_answers({"DOCKER_HOST": f"unix://{path}"})
    finally:
        thread.join(timeout=5)
        server.close()
    assert not docker_engine_answers({"DOCKER_HOST": f"unix://{tmp_path}/absent.sock"})


def test_the_recorded_command_hides_dsn_passwords() -> None:
    from harness.server.provenance import redacted_command

    command = redacted_command(
        [
            "harness",
            "run",
            "s.yaml",
            "--dsn",
            "postgresql://u:hunter2@h/db",
            "--dsn=host=h password=pw2",
            "--dsn",
            "postgresql://u:pw3@[bad",
        ]
    )
    text = " ".join(command)
    assert "hunter2" not in text and "pw2" not in text and "pw3" not in text
    assert command[:3] == ["harness", "run", "s.yaml"]
    assert "user=u" in command[4]
