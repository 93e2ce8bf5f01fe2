"""Server settings whose names suggest a secret are recorded and shown without their
value: in run.json (harness/server/provenance.py), in report.html and in a comparison,
an older run.json that still holds one included."""

from __future__ import annotations

import pytest

from harness.analysis.provenance import provenance_differences
from harness.report.html import _provenance
from harness.results.document import RunDocument, ScenarioRef
from harness.results.redaction import REDACTED, redacted_settings, secret_setting

SECRET = "Sekr3t-value"


@pytest.mark.parametrize(
    "name",
    [
        "primary_conninfo",
        "archive_command",
        "restore_command",
        "archive_cleanup_command",
        "recovery_end_command",
        "ssl_passphrase_command",
        "password_encryption",
        "myext.api_key",
        "myext.apikey",
        "aws.access_key_id",
        "vault.auth_token",
        "harness.test_secret",
        "anon.salt",
        "cloud.credentials",
    ],
)
def test_a_name_that_suggests_a_secret_is_redacted(name: str) -> None:
    assert secret_setting(name)


@pytest.mark.parametrize(
    "name",
    ["work_mem", "max_index_keys", "log_replication_commands", "krb_server_keyfile", "jit"],
)
def test_other_names_are_kept(name: str) -> None:
    assert not secret_setting(name)


def _settings() -> dict[str, dict[str, str | None]]:
    command = f"aws s3 cp %p s3://bucket/%f --secret {SECRET}"
    return {
        "archive_command": {"setting": command, "unit": None, "source": "configuration file"},
        "work_mem": {"setting": "8192", "unit": "kB", "source": "configuration file"},
    }


def test_redaction_keeps_the_source_and_the_other_settings() -> None:
    redacted = redacted_settings(
        {**_settings(), "archive_command": {**_settings()["archive_command"], "shown": "x"}}
    )
    assert redacted["archive_command"] == {
        "setting": REDACTED,
        "unit": None,
        "source": "configuration file",
        "shown": REDACTED,
    }
    assert redacted["work_mem"] == _settings()["work_mem"]


def test_an_older_run_json_shows_no_secret_in_the_report_or_a_comparison() -> None:
    """A run.json written before the rule holds the value: the page and compare hide it."""
    metadata = {"postgres": {"server_version_num": 170010, "non_default_settings": _settings()}}
    older = RunDocument(
        run_id="r",
        started_at="2026-12-01T00:00:00+00:00",
        scenario=ScenarioRef(name="s", path="s.yaml", sha256="0", seed=1),
    ).document()
    document = RunDocument.from_data(
        {**older, "format_version": 2, "metadata": metadata}, "run.json"
    )  # a format 2 document: its one server in `metadata`
    page = _provenance(document)
    assert SECRET not in page and "archive_command" in page and REDACTED in page
    differences = provenance_differences(metadata, {"postgres": {"non_default_settings": {}}})
    shown = [(d.what, d.a, d.b) for d in differences]
    assert ("setting archive_command", REDACTED, "default") in shown
    assert SECRET not in str(shown)
