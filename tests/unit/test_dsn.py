"""A malformed --dsn is one line of our own, never libpq's text, which can quote the
password; and no error text shows a password it carries."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.server.dsn import check_dsn, redact, scrub
from harness.server.kinds import ServerOptions
from harness.server.providers import choose_provider
from tests.conftest import SCENARIOS, harness_cli

SECRET = "Sekr%zzet"
MALFORMED = f"postgresql://u:{SECRET}@host/db"


@pytest.mark.parametrize(
    ("dsn", "said"),
    [
        (MALFORMED, "the URL's password is not valid percent-encoding"),
        ("postgresql://u%zz:Sekret@host/db", "the URL's user name is not valid"),
        ("postgresql://u:Sekret@ho%zzst/db", "the URL's host or port is not valid"),
        ("postgresql://u:Sekret@host/d%zzb", "the URL's database name is not valid"),
        ("postgresql://u:Sekret@[::1/db", "an IPv6 address in [ ] is not closed"),
        ("postgresql://u:Sekret@[::1]x/db", "after an IPv6 address in [ ] only :port"),
        ("postgresql://u:Sekret@host/db?sslmode", "query parameter 'sslmode' has no =value"),
        ("postgresql://u:Sekret@host/db?nosuch=1", "'nosuch' is not a libpq keyword"),
        ("postgresql://u:Sekret@host/db?sslmode=a%zz", "parameter 'sslmode' is not valid"),
        ("Sekret", "not a connection string"),
        ("host=h password=Sek ret", "a keyword=value pair has no keyword or no ="),
        ("host=h password='Sekret", "the value of 'password' opens a quote that is not closed"),
        ("host=h nosuch=Sekret", "'nosuch' is not a libpq keyword"),
    ],
)
def test_a_malformed_dsn_names_its_part_never_its_text(dsn: str, said: str) -> None:
    with pytest.raises(HarnessError) as refused:
        check_dsn(dsn)
    message = str(refused.value)
    assert message.startswith("--dsn: ") and said in message
    assert "Sek" not in message and "\n" not in message


def test_a_wellformed_dsn_passes() -> None:
    check_dsn("postgresql://u:p%40ss@[::1]:5433/db?sslmode=require&passfile=/x")
    check_dsn("host=/tmp port=5432 user=u password='a b' dbname=db")


def test_every_provider_choice_checks_the_dsn_first() -> None:
    with pytest.raises(HarnessError, match="--dsn: the URL's password"):
        choose_provider(ServerOptions("external", MALFORMED, allow_version_mismatch=True), {})
    with pytest.raises(HarnessError, match="--dsn: the URL's password"):
        choose_provider(ServerOptions("embedded", MALFORMED), {})


def test_scrub_takes_passwords_out_of_any_text() -> None:
    text = (
        "failed: postgresql://alice:hunter2@db:5432/q?password=pw2&sslmode=require, "
        "host=db password='p w\\'3' sslpassword=pw4 port=1"
    )
    scrubbed = scrub(text)
    for secret in ("hunter2", "pw2", "p w", "pw4"):
        assert secret not in scrubbed
    assert "postgresql://alice@db:5432/q" in scrubbed and "port=1" in scrubbed


def test_redact_drops_every_secret_keyword() -> None:
    shown = redact("host=h user=u password=p1 sslpassword=p2 oauth_client_secret=p3")
    assert "p1" not in shown and "p2" not in shown and "p3" not in shown
    assert "user=u" in shown


COMMANDS = [
    ["run", str(SCENARIOS / "noisy-neighbour.yaml")],
    ["explain", str(SCENARIOS / "dequeue-check.yaml")],
    ["check"],
    ["overhead"],
    ["isolation"],
    ["worker", "--run", "abc"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_every_command_refuses_a_malformed_dsn_in_one_line(
    command: list[str], tmp_path: Path
) -> None:
    """Before anything runs: exit 2, one line, no password, no results folder."""
    done = harness_cli(*command, "--dsn", MALFORMED, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("error: --dsn: the URL's password is not valid")
    assert "Sekr" not in done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_fleet_members_error_line_quotes_no_password() -> None:
    """What a member writes into the fleet's tables (and the coordinator prints) of an
    error that quotes a DSN."""
    from harness.run.member import _first_line

    error = RuntimeError("connection to postgresql://bench:Sekr3t@db:5432/q failed\nmore")
    assert _first_line(error) == "connection to postgresql://bench@db:5432/q failed"
