"""Server settings whose values may hold a secret, recorded without them.

On a managed server or a standby a setting can carry a password or a key:
`primary_conninfo` (a connection string), `archive_command` and `restore_command` (a
shell command with a cloud store's credentials), an extension's `api_key`. The rule goes
by the setting's name, since its value cannot be told safe: a name that contains
conninfo, password, passphrase, secret, token, credential or salt, or whose words (split
at `_` and `.`) include one ending in key or command, is recorded as REDACTED.
`archive_command` and `myext.apikey` are redacted; `max_index_keys` and
`log_replication_commands` (a count and a switch) are not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "(redacted: the name suggests a secret)"
_WITHIN = ("conninfo", "password", "passphrase", "secret", "token", "credential", "salt")
_WORD_ENDINGS = ("key", "command")


def secret_setting(name: str) -> bool:
    lowered = name.lower()
    if any(part in lowered for part in _WITHIN):
        return True
    return any(word.endswith(_WORD_ENDINGS) for word in re.split(r"[_.]", lowered))


def redacted_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Non-default settings as run.json records them: a secret's value and text replaced."""
    return {
        name: _redacted(value) if secret_setting(name) else value
        for name, value in settings.items()
    }


def _redacted(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return REDACTED
    return {**value, "setting": REDACTED, "shown": REDACTED}
