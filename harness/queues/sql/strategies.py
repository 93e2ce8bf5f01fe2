"""Strategies: a .sql file of named blocks each, merged over the shared blocks.

The shared file `queue.sql` holds what every strategy does the same way (enqueue,
start, complete, books, the backlog load); a strategy file adds its `dequeue` and may
override any shared block. A file whose header says `-- extends: NAME` starts from that
strategy's blocks. Optional blocks: `served` (run in the claim transaction after `start`,
with the claimed tenant) and `setup` (run once after the schema is created).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.simulate import POLICIES
from harness.errors import HarnessError
from harness.scenario.traits import QueueTraits
from harness.sqlfiles import (
    SqlBlock,
    builtin_blocks,
    builtin_names,
    builtin_source,
    builtin_text,
    parse_blocks,
)

REQUIRED_BLOCKS = (
    "enqueue",
    "dequeue",
    "start",
    "complete",
    "books",
    "backlog_tenants",
    "backlog_jobs",
    "after_load",
)
OPTIONAL_BLOCKS = ("served", "retire", "setup", "monitor")
_EXTENDS = re.compile(r"^--\s*extends:\s*(?P<value>[a-z0-9_]+)\s*$")
_CLAIM = re.compile(r"^--\s*claim:\s*(?P<value>hold|short)\s*$")
_SIMULATE = re.compile(r"^--\s*simulate:\s*(?P<value>[a-z0-9_]+)\s*$")
# What a header line of each directive may say: a value outside it is refused, never
# taken as the directive's absence (`-- claim: hodl` is no short claim).
_DIRECTIVES = {
    "extends": (_EXTENDS, "a strategy's name: lowercase letters, digits and _"),
    "claim": (_CLAIM, "short or hold"),
    "simulate": (_SIMULATE, "a policy's name: lowercase letters, digits and _"),
}
_DIRECTIVE = re.compile(r"^--\s*(?P<key>[a-z_]+):(?P<value>.*)$")
# A strategy is named by its file, as scenarios name it (harness/scenario/model.py Name).
_STRATEGY_FILE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}\.sql$")


# A strategy's workers are the harness's own processes: faults.crashes kills one mid-job,
# with its lease and retries; worker_kills is for a library's worker.
OWN_KILLS = "its workers are the harness's own: faults.crashes kills them mid-job"


@dataclass(frozen=True)
class Strategy:
    name: str
    blocks: dict[str, SqlBlock]
    hold_lock: bool = False  # `-- claim: hold`: the work runs inside the claim transaction
    # The simulator's policy for it: `-- simulate: NAME`, else the first of the strategy
    # and its ancestors (`-- extends:`) that is a policy (harness/analysis/simulate.py).
    simulate_as: str | None = None

    def sql(self, block: str) -> str:
        return self.blocks[block].sql

    def has(self, block: str) -> bool:
        return block in self.blocks

    @property
    def sql_sha256(self) -> str:
        """The SHA-256 of what its workers run: every merged block's SQL by name, and the
        claim mode. A fleet member's install must give the coordinator's."""
        merged = {
            "claim": "hold" if self.hold_lock else "short",
            "blocks": {name: block.sql for name, block in self.blocks.items()},
        }
        return hashlib.sha256(json.dumps(merged, sort_keys=True).encode()).hexdigest()

    @property
    def traits(self) -> QueueTraits:
        """Faults put jobs back with a plain update of `jobs`: a strategy that keeps
        per-job state elsewhere (counters in queue_tenants, a held transaction) would
        drift, so it cannot take them."""
        shared = all(self.blocks[name].source == SHARED_SOURCE for name in ("start", "complete"))
        if self.hold_lock or self.has("retire") or not shared:
            return QueueTraits(
                faults=f"strategy '{self.name}' keeps job state beyond the jobs row (its own "
                "start, complete or retire, or a held lock); faults run with fifo, "
                "round_robin and other strategies that use the shared start and complete",
                worker_kills=OWN_KILLS,
                backend_kills=f"strategy '{self.name}' cannot take faults",
                server_crash=f"strategy '{self.name}' cannot take faults",
                connection_exhaustion=f"strategy '{self.name}' cannot take faults",
            )
        # backend_kills and server_crash: its workers reconnect (recovery.py) and look
        # their cut claim up in the claim log, as after faults.server_restart; they connect
        # before the clock starts, so a connection exhaustion refuses them only that
        return QueueTraits(worker_kills=OWN_KILLS)

    def shown(self) -> str:
        """Every block in the order a claim uses them, exactly as the workers run them."""
        order = [
            "setup",
            "backlog_tenants",
            "backlog_jobs",
            "after_load",
            "enqueue",
            "dequeue",
            "start",
            "served",
            "retire",
            "complete",
            "books",
            "monitor",
        ]
        ordered = sorted(self.blocks.values(), key=lambda block: order.index(block.name))
        return "\n".join(block.shown() for block in ordered)


PACKAGE = "harness.queues.sql"
SHARED_SOURCE = builtin_source(PACKAGE, "queue.sql")


def schema_blocks() -> dict[str, SqlBlock]:
    return builtin_blocks(PACKAGE, "schema.sql")


def shared_blocks() -> dict[str, SqlBlock]:
    return builtin_blocks(PACKAGE, "queue.sql")


@dataclass(frozen=True)
class _File:
    source: str  # as shown to people
    text: str


def _builtin_files() -> dict[str, _File]:
    return {
        Path(name).stem: _File(builtin_source(PACKAGE, name), builtin_text(PACKAGE, name))
        for name in builtin_names(PACKAGE, "strategies")
    }


def _extra_files(extra_dir: Path | None) -> dict[str, _File]:
    if extra_dir is None:
        return {}
    if not extra_dir.is_dir():
        raise HarnessError(f"{extra_dir}: --strategies-dir is not a directory")
    return {path.stem: _read_extra(path) for path in sorted(extra_dir.glob("*.sql"))}


def strategy_files(extra_dir: Path | None) -> dict[str, Path]:
    """The strategies of --strategies-dir by name, each with its file as given (the
    names load_strategies takes from it: a file named like a built-in replaces it)."""
    return {name: Path(file.source) for name, file in _extra_files(extra_dir).items()}


def _read_extra(path: Path) -> _File:
    """A strategy file of --strategies-dir, its header's directives checked."""
    if not _STRATEGY_FILE.match(path.name):
        raise HarnessError(
            f"{path}: a strategy is named by its file: lowercase letters, digits, _ and -, "
            "starting with a letter or digit, then .sql"
        )
    if not path.is_file():
        raise HarnessError(f"{path}: --strategies-dir holds a .sql that is not a file")
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError as error:
        raise HarnessError(f"{path}: not UTF-8 (byte {error.start}); a strategy is text") from None
    except OSError as error:
        raise HarnessError(f"{path}: cannot read ({error.strerror})") from None
    _check_directives(text, str(path))
    return _File(str(path), text)


def _check_directives(text: str, source: str) -> None:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("-- name:"):
            return
        found = _DIRECTIVE.match(line)
        if found is None or found["key"] not in _DIRECTIVES:
            continue
        pattern, allowed = _DIRECTIVES[found["key"]]
        if not pattern.match(line):
            raise HarnessError(
                f"{source}:{number}: -- {found['key']}: {found['value'].strip()!r} is not "
                f"allowed; it takes {allowed}"
            )


def load_strategies(extra_dir: Path | None = None) -> dict[str, Strategy]:
    """Every available strategy by name, each checked complete.

    A file in extra_dir replaces the built-in strategy of its name; it may extend that
    very built-in (`-- extends: round_robin` in round_robin.sql) to change one block.
    """
    builtins = _builtin_files()
    files = {**builtins, **_extra_files(extra_dir)}
    shared = shared_blocks()
    strategies = {}
    for name in sorted(files):
        blocks: dict[str, SqlBlock] = dict(shared)
        lineage = _lineage(name, files, builtins)
        for ancestor in reversed(lineage):
            blocks.update(parse_blocks(ancestor.text, ancestor.source))
        modes = [mode for file in lineage if (mode := _header(file.text, _CLAIM))]
        hold = bool(modes) and modes[0] == "hold"
        strategy = Strategy(name, blocks, hold, _simulation_policy(name, lineage))
        strategies[name] = _checked(strategy, files[name].source)
    return strategies


def _lineage(name: str, files: dict[str, _File], builtins: dict[str, _File]) -> list[_File]:
    """The strategy's file, the one it extends (`-- extends: NAME`), and so on."""
    chain, names = [files[name]], [name]
    while (parent := _extends(chain[-1].text)) is not None:
        replaced = builtins.get(parent)
        if parent == names[-1] and replaced is not None and chain[-1] is not replaced:
            chain.append(replaced)  # an override extending the built-in it replaces
            continue
        if parent not in files:
            raise HarnessError(f"{chain[-1].source}: extends unknown strategy '{parent}'")
        if parent in names:
            raise HarnessError(
                f"{chain[-1].source}: extends forms a cycle: {' -> '.join([*names, parent])}"
            )
        chain.append(files[parent])
        names.append(parent)
    return chain


def _simulation_policy(name: str, lineage: list[_File]) -> str | None:
    for file in lineage:
        if (explicit := _header(file.text, _SIMULATE)) is not None:
            if explicit not in POLICIES:
                raise HarnessError(
                    f"{file.source}: simulate: '{explicit}' is not a policy; "
                    f"known: {', '.join(POLICIES)}"
                )
            return explicit
    names = [name, *filter(None, (_extends(file.text) for file in lineage))]
    return next((candidate for candidate in names if candidate in POLICIES), None)


def _extends(text: str) -> str | None:
    return _header(text, _EXTENDS)


def _header(text: str, directive: re.Pattern[str]) -> str | None:
    """A `-- key: value` directive of the file's header (before its first block)."""
    for line in text.splitlines():
        if line.startswith("-- name:"):
            return None
        found = directive.match(line)
        if found:
            return found["value"]
    return None


def _checked(strategy: Strategy, source: str) -> Strategy:
    known = set(REQUIRED_BLOCKS) | set(OPTIONAL_BLOCKS)
    unknown = sorted(set(strategy.blocks) - known)
    if unknown:
        allowed = ", ".join(sorted(known))
        raise HarnessError(f"{source}: unknown block(s) {', '.join(unknown)}; allowed: {allowed}")
    missing = [block for block in REQUIRED_BLOCKS if block not in strategy.blocks]
    if missing:
        raise HarnessError(f"{source}: strategy '{strategy.name}' lacks block(s) {missing}")
    return strategy
