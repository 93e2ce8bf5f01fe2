"""A library's default and tuned mappings side by side: the order tables list strategies
in, grouped by library (the built-in SQL strategies are the harness's), each library's
default mappings before its tuned ones, and the tuned settings named.

Pure: the strategies' settings come from run.json (`queue_settings`), the order of the
strategies from the scenario's list.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.results.document import HARNESS, QueueSetting

SETTING_HEADER = "setting"


def setting_of(strategy: str, settings: dict[str, QueueSetting]) -> QueueSetting:
    """A strategy's setting; one run.json does not record (an older run) is the
    harness's own default."""
    return settings.get(strategy, QueueSetting(HARNESS))


def any_tuned(strategies: Iterable[str], settings: dict[str, QueueSetting]) -> bool:
    return any(setting_of(name, settings).tuned for name in strategies)


def grouped(strategies: Iterable[str], settings: dict[str, QueueSetting]) -> list[str]:
    """The strategies by library, in the order each library first appears, each library's
    default mappings first; otherwise as given."""
    names = list(dict.fromkeys(strategies))
    first: dict[str, int] = {}
    for position, name in enumerate(names):
        first.setdefault(setting_of(name, settings).library, position)

    def key(item: tuple[int, str]) -> tuple[int, bool, int]:
        position, name = item
        setting = setting_of(name, settings)
        return first[setting.library], bool(setting.tuned), position

    return [name for _, name in sorted(enumerate(names), key=key)]


def tuned_bullets(strategies: Iterable[str], settings: dict[str, QueueSetting]) -> list[str]:
    """One line per tuned strategy: its library and the settings it runs with."""
    return [
        f"`{name}` ({setting.library}, tuned): {setting.named}"
        for name in dict.fromkeys(strategies)
        if (setting := setting_of(name, settings)).tuned
    ]
