"""The article's claim pattern, written once for every transport and every caller.

The claim is one short transaction: `dequeue` (SELECT ... FOR UPDATE SKIP LOCKED), then,
for strategies that have it, `served` (the tenant's turn is used), `start` (the job is
running, started_at = clock_timestamp()) and `retire` (the tenant's upkeep). BEGIN goes
with the dequeue and the start (and retire) with the COMMIT, so a claim costs two round
trips, three with `served`: a guard there that changes no row (a per-tenant cap reached
by a concurrent claim) must roll the claim back before anything is committed, and is
counted as a lost race. `served` comes before `start`, so a guard decides before the
job's started_at is taken and recorded intervals never overlap more than it allowed.

A strategy whose header says `-- claim: hold` keeps the transaction, and so the job's
row lock, open for the work: `complete` then ends it with the COMMIT.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from harness.queues.sql.session import BEGIN, COMMIT, ROLLBACK, Result, Session, Step

if TYPE_CHECKING:  # annotations only: workers load this module
    from harness.queues.sql.strategies import Strategy


class LostRace(Exception):
    """The tenant's turn went to a concurrent claim; roll back and dequeue again."""


@dataclass(frozen=True)
class ClaimSql:
    """A strategy's statements of the claim and the completion, as the workers run them."""

    dequeue: str
    start: str
    complete: str
    served: str | None = None
    retire: str | None = None
    hold_lock: bool = False  # one transaction around claim, work and completion

    @classmethod
    def of(cls, strategy: Strategy) -> ClaimSql:
        def optional(block: str) -> str | None:
            return strategy.sql(block) if strategy.has(block) else None

        return cls(
            dequeue=strategy.sql("dequeue"),
            start=strategy.sql("start"),
            complete=strategy.sql("complete"),
            served=optional("served"),
            retire=optional("retire"),
            hold_lock=strategy.hold_lock,
        )


@dataclass(frozen=True)
class Claimed:
    job_id: int
    tenant_id: int
    extra: list[Result]  # the results of the caller's extra steps, in order


Extra = Callable[[dict[str, Any]], list[Step]]  # the claimed job's parameters -> steps


def no_extra(params: dict[str, Any]) -> list[Step]:
    return []


def claim(
    session: Session,
    sql: ClaimSql,
    params: dict[str, Any],
    extra: Extra = no_extra,
    own_transaction: bool = True,
) -> Claimed | None:
    """One claim: the job and its tenant, or None if no job is free.

    `extra` adds steps after `start` in the claim transaction (the fault features' claim
    log and lease). Without `own_transaction` the statements run inside whatever
    transaction the caller holds (`harness check` rolls each claim back)."""
    begin = [BEGIN] if own_transaction else []
    row = session.run([*begin, (sql.dequeue, params)])[-1].row
    if row is None:
        if own_transaction:
            session.run([COMMIT])
        return None
    job_id, tenant_id = row
    claimed = {**params, "job_id": job_id, "tenant_id": tenant_id}
    try:
        results = _start(session, sql, claimed, extra(claimed), own_transaction)
    except BaseException:
        if own_transaction:
            rollback(session)
        raise
    return Claimed(job_id, tenant_id, results)


def _start(
    session: Session,
    sql: ClaimSql,
    params: dict[str, Any],
    extra: list[Step],
    own_transaction: bool,
) -> list[Result]:
    if sql.served is not None and session.run([(sql.served, params)])[0].changed == 0:
        raise LostRace()
    retire: list[Step] = [] if sql.retire is None else [(sql.retire, params)]
    commit = [COMMIT] if own_transaction and not sql.hold_lock else []
    results = session.run([(sql.start, params), *retire, *extra, *commit])
    if results[0].changed != 1:
        raise RuntimeError(f"job {params['job_id']} was dequeued but could not be started")
    return results[1 + len(retire) : 1 + len(retire) + len(extra)]


def complete(session: Session, sql: ClaimSql, params: dict[str, Any], job_id: int) -> None:
    """The job is done: in autocommit, or ending the claim's transaction (`hold`)."""
    commit = [COMMIT] if sql.hold_lock else []
    updated = session.run([(sql.complete, {**params, "job_id": job_id}), *commit])[0].changed
    if updated != 1:
        raise RuntimeError(f"job {job_id}: complete updated {updated} rows, expected 1")


def rollback(session: Session) -> None:
    """Ends a transaction that failed; a connection that is gone has nothing to end."""
    with contextlib.suppress(psycopg.Error):
        session.run([ROLLBACK])
