"""What a fault scenario's faults did, per repetition, from run.json, and the planned
faults that never happened (pure)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import pandas as pd

from harness.analysis.frames import REPETITION, repetition_rows, wait_seconds
from harness.report.cells import count, number
from harness.report.sections import Section, Table
from harness.results.document import RepetitionEntry, RunDocument
from harness.scenario.model import Crash, Faults, Scenario

FAULT_COLUMNS = [
    "strategy",
    "workers",
    "repetition",
    "crashes",
    "lost",
    "duplicates",
    "stuck",
    "dead_lettered",
    "retried_done",
    "recovery_max_s",
    "recovery_p50_s",
    "server_restarts",
    "held_at_restart",
    "in_doubt_claims",
    "reconnects",
    "backend_kills",
    "sessions_terminated",
    "server_crashes",
    "connections_held",
    "reconnects_refused",
]


def fault_table(document: RunDocument) -> pd.DataFrame | None:
    """faults.csv: one row per repetition of what its faults did, from run.json."""
    rows = [
        {
            "strategy": entry.strategy,
            "workers": entry.workers,
            "repetition": entry.repetition,
            **{
                column: faults.get(column)
                for column in FAULT_COLUMNS[4:]
                if column != "held_at_restart"
            },
            "crashes": len(faults["crashes"]),
            "held_at_restart": faults.get("restart_held_at_restart"),
        }
        for entry in document.repetitions
        if (faults := entry.faults) is not None
    ]
    return pd.DataFrame(rows, columns=FAULT_COLUMNS) if rows else None


FAULTS_NOTE = (
    "Per repetition, from run.json: lost = jobs neither done nor dead-lettered (0, or the "
    "run fails); duplicates = jobs whose work started again after a crash (at-least-once, "
    "with a lease); stuck = jobs left running by a killed worker (no lease); recovery = "
    "from the kill to the job's new start, in seconds; held at restart = jobs being "
    "worked on when the server restarted; in-doubt claims = claims whose commit the "
    "restart cut (resolved from the claim log); backend kills = moments the workers' "
    "sessions were terminated (faults.backend_kills), sessions cut = how many in all; "
    "server crashes = immediate shutdowns (faults.server_crash), after which the workers "
    "reconnect as after a restart; connections held = the most idle connections the "
    "harness held to fill the server (faults.connection_exhaustion); reconnects refused "
    "= the workers' attempts to connect again that the server refused (down, or full)."
)


def fault_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = [
        "strategy",
        "workers",
        "rep",
        "crashes",
        "lost",
        "duplicates",
        "stuck",
        "dead-lettered",
        "retried",
        "recovery max",
        "recovery p50",
        "restarts",
        "held at restart",
        "in-doubt claims",
        "reconnects",
    ]
    # the sessions' faults, where a repetition had them (a run before them never did)
    cut = [c for c in _CUTS if any(bool(value) for value in table[c].dropna())]
    headers += [_CUTS[c] for c in cut]
    rows = [
        [str(r["strategy"]), *(count(r[c]) for c in list(r)[1:9])]
        + [number(r["recovery_max_s"]), number(r["recovery_p50_s"])]
        + [count(r[c]) for c in FAULT_COLUMNS[11:15]]
        + [count(r[c]) for c in cut]
        for r in table.to_dict("records")
    ]
    return headers, rows


_CUTS = {
    "backend_kills": "backend kills",
    "sessions_terminated": "sessions cut",
    "server_crashes": "server crashes",
    "connections_held": "connections held",
    "reconnects_refused": "reconnects refused",
}


def faults_section(table: pd.DataFrame, warnings: list[str]) -> Section:
    rows = Table.of(
        fault_rows(table),
        "Faults: lost, duplicated, stuck, dead-lettered, recovery (s) per repetition",
    )
    return Section(
        "faults", "Faults", FAULTS_NOTE, tables=[rows], console=[rows], warnings=warnings
    )


# run.json's library_faults counts, as they are recorded (0 where an older run has none)
_AS_RECORDED = [
    "backend_kills",
    "sessions_terminated",
    "server_crashes",
    "connections_held",
    "exits",
    "restarts",
    "ok",
    "duplicated",
    "stranded",
    "abandoned",
    "waiting",
    "lost",
]
# run.json's lists of job ids, counted
_LISTED = ["unreported", "unrecorded", "unexpected", "rerun"]
# a worker kill's interrupted jobs: how many, how many started again, how soon (s)
_KILLED = ["interrupted", "started_again", "recovery_p50_s", "recovery_max_s"]
# the kills' throughput dip (run.json's `dips`): the median before the first, the lowest
# after any, the longest until back (none if one never was)
_DIP = ["throughput_before_per_s", "throughput_lowest_per_s", "throughput_back_s"]
# a kill's figures as library-faults.csv has them: the recovery, then the dip
KILL_FIGURES = [*_KILLED[2:], *_DIP]
LIBRARY_FAULT_COLUMNS = [
    "strategy",
    "workers",
    "repetition",
    "worker_kills",
    *_AS_RECORDED,
    *_LISTED,
    "window_s",
    *_KILLED,
    *_DIP,
    "promise",
    "verdict",
    "verdict_why",
]


def library_fault_table(document: RunDocument) -> pd.DataFrame | None:
    """library-faults.csv: one row per repetition of a queue behind the adapter contract
    under a library's faults, from run.json: what was done to its workers, its jobs in
    their outcomes, and a worker kill's interrupted jobs beside its library's promise."""
    rows = []
    for entry in document.repetitions:
        faults = entry.library_faults
        if faults is None:
            continue
        queue = document.queues.get(entry.strategy)
        promise = queue.recovery if queue is not None else None
        verdict, why = kill_verdict(faults, promise)
        held = faults.get("interrupted")
        rows.append(
            {
                "strategy": entry.strategy,
                "workers": entry.workers,
                "repetition": entry.repetition,
                "worker_kills": faults["kills"],
                **{column: faults.get(column, 0) for column in _AS_RECORDED},
                **{column: len(faults.get(column, [])) for column in _LISTED},
                "window_s": faults["window_s"],
                "interrupted": len(held) if held is not None else None,
                **{column: faults.get(column) for column in _KILLED[1:]},
                **dip_figures(faults.get("dips") or []),
                "promise": promised(promise),
                "verdict": verdict,
                "verdict_why": why,
            }
        )
    return pd.DataFrame(rows, columns=LIBRARY_FAULT_COLUMNS) if rows else None


RECOVERY_WAIT_COLUMNS = [
    "strategy",
    "workers",
    "repetition",
    "killed_at_s",
    "recovery_s",
    "tenant_class",
    "jobs_before",
    "wait_p50_before_s",
    "jobs_during",
    "wait_p50_during_s",
]


def recovery_waits(document: RunDocument, jobs: pd.DataFrame | None) -> pd.DataFrame | None:
    """recovery-waits.csv: per worker kill and tenant class, the median wait (enqueue to
    start) of the jobs that started before the kill, and of those queued during its
    recovery: enqueued before it ended, started after the kill. The recovery runs from
    the kill until its throughput was back (its dip's back_after_s), or, never back,
    until the repetition's last start. From jobs.csv (the jobs with moments of their own)
    and each kill's `killed_at` on the server's clock (run.json's dips; a run from before
    they had one has no rows)."""
    if jobs is None or not len(jobs):
        return None
    rows = []
    for entry in document.repetitions:
        dips = (entry.library_faults or {}).get("dips") or []
        mine = repetition_rows(jobs, {key: getattr(entry, key) for key in REPETITION})
        for dip in dips:
            if dip.get("killed_at") is None or not len(mine):
                continue
            rows.extend(_waits_around(entry, dip, mine))
    return pd.DataFrame(rows, columns=RECOVERY_WAIT_COLUMNS) if rows else None


def _waits_around(
    entry: RepetitionEntry, dip: dict[str, Any], jobs: pd.DataFrame
) -> list[dict[str, Any]]:
    killed = pd.Timestamp(dip["killed_at"])
    back = dip.get("back_after_s")
    until = killed + pd.Timedelta(seconds=back) if back is not None else jobs["started_at"].max()
    waits = wait_seconds(jobs)
    before = jobs["started_at"] < killed
    during = (jobs["started_at"] >= killed) & (jobs["enqueued_at"] < until)
    rows = []
    for tenant_class in dict.fromkeys(jobs["tenant_class"]):
        mine = jobs["tenant_class"] == tenant_class
        rows.append(
            {
                "strategy": entry.strategy,
                "workers": entry.workers,
                "repetition": entry.repetition,
                "killed_at_s": dip["killed_at_s"],
                "recovery_s": round((until - killed).total_seconds(), 3),
                "tenant_class": tenant_class,
                "jobs_before": int((mine & before).sum()),
                "wait_p50_before_s": _median(waits[mine & before]),
                "jobs_during": int((mine & during).sum()),
                "wait_p50_during_s": _median(waits[mine & during]),
            }
        )
    return rows


def _median(values: pd.Series) -> float | None:
    return round(float(values.median()), 3) if len(values) else None


RECOVERY_WAITS_NOTE = (
    "Per worker kill and tenant class (recovery-waits.csv): the median wait, enqueue to "
    "start, of the jobs that started before the kill, and of those queued during its "
    "recovery (enqueued before it ended, started after the kill); the recovery runs from "
    "the kill until its throughput was back at 90 % (or, never back, until the last "
    "start). What a small tenant feels of a fault: its jobs wait for the library to come "
    "back."
)


def recovery_wait_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = [
        "strategy",
        "workers",
        "rep",
        "killed at (s)",
        "recovery (s)",
        "tenants",
        "jobs before",
        "p50 wait before (s)",
        "jobs during",
        "p50 wait during (s)",
    ]
    rows = [
        [
            str(r["strategy"]),
            count(r["workers"]),
            count(r["repetition"]),
            number(r["killed_at_s"]),
            number(r["recovery_s"]),
            str(r["tenant_class"]),
            count(r["jobs_before"]),
            number(r["wait_p50_before_s"]),
            count(r["jobs_during"]),
            number(r["wait_p50_during_s"]),
        ]
        for r in table.to_dict("records")
    ]
    return headers, rows


def dip_figures(dips: list[dict[str, Any]]) -> dict[str, float | None]:
    """A repetition's kills' throughput dips in three figures (_DIP)."""
    measured = [dip for dip in dips if dip.get("before_per_s") is not None]
    if not measured:
        return dict.fromkeys(_DIP)
    lows = [dip["lowest_per_s"] for dip in measured if dip["lowest_per_s"] is not None]
    backs = [dip["back_after_s"] for dip in measured]
    return {
        "throughput_before_per_s": measured[0]["before_per_s"],
        "throughput_lowest_per_s": min(lows) if lows else None,
        "throughput_back_s": None if None in backs else max(backs),
    }


def dip_words(row: Mapping[Hashable, Any]) -> str:
    """The dip as the kills' table says it: "10/s, down to 0/s, back after 1.4 s"."""
    before, lowest = row["throughput_before_per_s"], row["throughput_lowest_per_s"]
    if _missing(before):
        return "-"
    back = row["throughput_back_s"]
    low = f", down to {number(lowest)}/s" if not _missing(lowest) else ""
    return f"{number(before)}/s{low}, " + (
        f"back after {number(back)} s" if not _missing(back) else "not back in the window"
    )


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


# A documented recovery time is when a library's sweep or heartbeat check may first see a
# dead worker's job; its period and the machine's load come on top. Within this much of
# it, the job was started again as promised; a window shorter than it cannot tell.
PROMISE_SLACK = 1.5
PROMISE_GRACE_S = 5.0
_DONE = ("ok", "duplicated")


def promised(promise: dict[str, Any] | None) -> str | None:
    """The promise in a few words: "retried after 30 s", "left"."""
    if promise is None:
        return None
    after = promise.get("after_s")
    return str(promise["then"]) + (f" after {after:g} s" if after is not None else "")


def kill_verdict(faults: dict[str, Any], promise: dict[str, Any] | None) -> tuple[str, str]:
    """A repetition's worker kills against its library's promise (the manifest's
    `recovery`): "as promised", "worse" or "better", with why, judged on each job a kill
    interrupted; or why there is no verdict. Empty without worker kills."""
    if not faults.get("kills"):
        return "", ""
    held = faults.get("interrupted")
    if promise is None:
        return "no promise", "its adapter's manifest declares no recovery"
    if held is None or not faults.get("starts_said"):
        return "not said", "its adapter says no starts: which jobs a kill interrupted is unknown"
    # a job done before the kill took its worker, its report lost with it: not held
    held = [r for r in held if r["started_again_after_s"] is not None or r["outcome"] not in _DONE]
    if not held:
        return "no job held", "no killed worker held a job it had not finished"
    window = float(faults["window_s"])
    judged = [_judged(row, promise, window) for row in held]
    for verdict in ("worse", "not reached", "better", "as promised"):
        whys = [why for seen, why in judged if seen == verdict]
        if whys:
            shown = "; ".join(whys[:3]) + (f"; and {len(whys) - 3} more" if len(whys) > 3 else "")
            return verdict, shown
    raise AssertionError("a judged job has one of the verdicts")


def _judged(row: dict[str, Any], promise: dict[str, Any], window: float) -> tuple[str, str]:
    """One interrupted job against the promise: its verdict and why."""
    then, after = promise["then"], promise.get("after_s")
    again, outcome = row["started_again_after_s"], row["outcome"]
    job = f"job {row['job']} (killed at {row['killed_at_s']:g} s)"
    if row.get("worker", 0) is None:  # its start unsaid: taken by a worker a kill ended
        job = f"job {row['job']} (held unsaid; the last kill at {row['killed_at_s']:g} s)"
    bound = after * PROMISE_SLACK + PROMISE_GRACE_S if after is not None else None
    left_s = window - float(row["killed_at_s"])  # the window after the kill
    documented = f"documented: {promised(promise)}"
    if outcome == "lost":
        return "worse", f"{job} lost; {documented}"
    if again is not None:
        if then == "retried" and bound is not None and again > bound:
            return "worse", f"{job} started again after {again:g} s; {documented}"
        if then == "retried":
            return "as promised", f"{job} started again after {again:g} s; {documented}"
        return "better", f"{job} started again after {again:g} s; {documented}"
    if outcome == "abandoned":
        verdict = {"failed": "as promised", "left": "better"}.get(then, "worse")
        return verdict, f"{job} marked failed by the library; {documented}"
    if then == "left":
        return "as promised", f"{job} not started again in {left_s:g} s; {documented}"
    if bound is not None and left_s <= bound:
        return "not reached", f"{job} not recovered within {left_s:g} s; {documented}"
    return "worse", f"{job} {outcome} {left_s:g} s after the kill; {documented}"


LIBRARY_FAULTS_NOTE = (
    "Per repetition, from run.json, every job in one outcome: ok = finished once; "
    "duplicated = finished more than once; stranded = still running or locked by a worker "
    "that is gone when the window (timeout_s) ended; abandoned = marked failed by the "
    "library itself; waiting = queued still, not taken up again within the window; lost = "
    "enqueued, then neither in the library's table at the end nor ever run. What "
    "the library recovers after the window is not waited for. Worker kills: SIGKILL of a "
    "worker's process group (restarts: by the harness, as a supervisor would); backend "
    "kills: the times its workers' sessions were terminated, and how many sessions; server "
    "crashes: an immediate shutdown and start (when, in run.json); conns held: idle "
    "connections the harness held through a connection exhaustion, leaving the library "
    "none to open (of max_connections, when, and the refusal that stopped it short, in "
    "run.json); exits: "
    "a worker that exited or failed on its own (each reason in run.json); unreported: "
    "done by the library's table, its worker killed before it said so (ok, no moments); "
    "unrecorded: reported done, absent from the library's table at the end (ok, no moments); "
    "unexpected: run or held by the library, never enqueued (in no outcome); rerun: "
    "started more than once though no kill interrupted it. Worker kills' table: the jobs "
    "each killed worker had started and not finished (its adapter's `started` events), "
    "and those left stranded or abandoned whose start no worker said (killed between the "
    "library's claim and the adapter's word: timed from the last kill), "
    "the time until a worker started each again, and the library's promise for such a job "
    "(its manifest's `recovery`); throughput: jobs reported done per second over 1 s "
    "windows, the median before the kill, the lowest after it, and how long until a whole "
    "window after it was back at 90 % of that median (run.json's `dips`). Verdict, per "
    "interrupted job, the worst shown: worse = "
    "lost, or not started again within 1.5 times its documented time plus 5 s (the check's "
    "period and load on top), or marked failed where it promised a retry; not reached = "
    "the window ended before that bound; better = started again, or marked failed, where "
    "it promised to fail or leave the job; as promised otherwise."
)


def missed_session_faults(planned: Faults, done: dict[str, Any]) -> list[str]:
    """Of the faults every queue takes (a server crash, a connection exhaustion, backend
    kills), those planned that a repetition's record (run.json's `faults` or
    `library_faults`) says never came."""
    missed = []
    if planned.server_crash is not None and not done.get("server_crashes"):
        missed.append(f"the server crash at {planned.server_crash.at_s:g} s")
    exhaustion = planned.connection_exhaustion
    if exhaustion is not None and not done.get("connection_exhaustions"):
        missed.append(f"the connection exhaustion from {exhaustion.from_s:g} s")
    cuts = sum(len(kill.moments()) for kill in planned.backend_kills)
    if done.get("backend_kills", 0) < cuts:
        missed.append(f"{cuts - done.get('backend_kills', 0)} of {cuts} backend kills")
    return missed


def missed_library_faults(document: RunDocument, scenario: Scenario) -> list[str]:
    """The planned library faults that never happened, one sentence per repetition that
    missed some: a server crash, backend kills, worker kills or a connection exhaustion
    planned after the run ended (every job done first), or kills a late tick made one.
    The repetition measured fewer faults than its scenario says."""
    planned = scenario.faults
    if planned is None:
        return []
    warnings = []
    for entry in document.repetitions:
        done = entry.library_faults
        if done is None:
            continue
        missed = missed_session_faults(planned, done)
        if done.get("kills", 0) < len(planned.worker_kills):  # each at least at its at_s
            kills = len(planned.worker_kills)
            missed.append(f"{kills - done.get('kills', 0)} of {kills} worker kills")
        if missed:
            label = f"{entry.strategy} x{entry.workers} #{entry.repetition}"
            warnings.append(
                f"{label}: {', '.join(missed)} never happened: the run ended first (every "
                "job done), or a tick came late and made one kill of several; this "
                "repetition measured fewer faults than planned"
            )
    return warnings


def library_faults_section(
    table: pd.DataFrame, warnings: list[str] | None = None, waits: pd.DataFrame | None = None
) -> Section:
    shown = [
        Table.of(_outcome_rows(table), "A library's faults: every job's outcome, per repetition")
    ]
    killed = table[table["worker_kills"] > 0]
    if len(killed):
        title = "Worker kills: the jobs they interrupted, beside the library's promise"
        shown.append(Table.of(_kill_rows(killed), title))
    if waits is not None:
        title = "Worker kills: each tenant class's median wait before and during the recovery"
        shown.append(Table.of(recovery_wait_rows(waits), title))
    return Section(
        "library_faults",
        "A library's faults",
        LIBRARY_FAULTS_NOTE + (" " + RECOVERY_WAITS_NOTE if waits is not None else ""),
        tables=shown,
        console=shown,
        warnings=warnings or [],
    )


# library-faults.csv's columns of counts shown in the outcome table, and their headers
_OUTCOME_HEADERS = {
    "workers": "workers",
    "repetition": "rep",
    "worker_kills": "worker kills",
    "backend_kills": "backend kills",
    "sessions_terminated": "sessions cut",
    "server_crashes": "server crashes",
    "connections_held": "conns held",
    "exits": "exits",
    "restarts": "restarts",
    **{name: name for name in _AS_RECORDED[6:]},  # the outcomes, ok to lost
    **{name: name for name in _LISTED},
}


def _outcome_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = ["strategy", *_OUTCOME_HEADERS.values(), "window (s)"]
    rows = [
        [str(r["strategy"]), *(count(r[c]) for c in _OUTCOME_HEADERS), number(r["window_s"])]
        for r in table.to_dict("records")
    ]
    return headers, rows


def _kill_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = [
        "strategy",
        "workers",
        "rep",
        "worker kills",
        "interrupted",
        "started again",
        "recovery p50 (s)",
        "recovery max (s)",
        "throughput",
        "promise",
        "verdict",
        "why",
    ]
    rows = [
        [
            str(r["strategy"]),
            *(count(r[c]) for c in ("workers", "repetition", "worker_kills", "interrupted")),
            count(r["started_again"]),
            number(r["recovery_p50_s"]),
            number(r["recovery_max_s"]),
            dip_words(r),
            str(r["promise"] or "-"),
            str(r["verdict"]),
            str(r["verdict_why"]),
        ]
        for r in table.to_dict("records")
    ]
    return headers, rows


def missed_faults(document: RunDocument, scenario: Scenario) -> list[str]:
    """The planned faults that never happened, one sentence per repetition that missed
    some: a crash whose worker held no job again before the run ended, a restart planned
    after the last job was done. The run measured less than its scenario says."""
    planned = scenario.faults
    if planned is None:
        return []
    warnings = []
    for entry in document.repetitions:
        if entry.faults is None:
            continue
        missed = _missed_crashes(planned.crashes, entry.faults["crashes"])
        missed += missed_session_faults(planned, entry.faults)
        restart = planned.server_restart
        if restart is not None and not entry.faults.get("server_restarts"):
            missed.append(f"the server restart at {restart.at_s:g} s")
        if missed:
            label = f"{entry.strategy} x{entry.workers} #{entry.repetition}"
            warnings.append(
                f"{label}: {', '.join(missed)} never happened: the run ended first, or the "
                "worker held no job again; this repetition measured fewer faults than planned"
            )
    return warnings


def _missed_crashes(planned: list[Crash], fired: list[dict[str, Any]]) -> list[str]:
    """Each planned crash (worker, at_s) not among those fired, matched one for one."""
    left = [(entry["worker"], entry["at_s"]) for entry in fired]
    missed = []
    for crash in sorted(planned, key=lambda crash: crash.at_s):
        match = next((f for f in left if f[0] == crash.worker and f[1] >= crash.at_s), None)
        if match is None:
            missed.append(f"the crash of worker {crash.worker} at {crash.at_s:g} s")
        else:
            left.remove(match)
    return missed
