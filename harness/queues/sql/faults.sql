-- Side tables and statements of the fault features (scenario `faults:` and failing jobs),
-- created only when a scenario uses them: a scenario without faults runs exactly the
-- statements it ran before. The `jobs` table stays the article's; what a fault needs to
-- remember (who claimed a job, its lease, its failed attempts) lives beside it.

-- name: claims_table
-- Every claim that committed, written in the claim transaction itself: a worker killed
-- outright cannot report its claims, and a claim whose COMMIT was cut by a server
-- restart is in doubt until the worker looks here for its own (pid, claim) row.
create table job_claims (
  job_id bigint not null,
  worker int not null,
  pid int not null,
  claim int not null,
  claimed_at timestamptz not null default clock_timestamp()
);

-- name: leases_table
-- A claimed job's lease: it covers the job's own duration plus the scenario's lease
-- seconds, so a live worker never needs to heartbeat; a dead one's lease runs out.
create table job_leases (
  job_id bigint primary key,
  worker int not null,
  pid int not null,
  expires_at timestamptz not null
);

-- name: attempts_table
-- Failed attempts of a job; `dead` once it used its last one (status 'dead' in jobs).
-- retry_at: when the backoff ends and the job may be queued again.
create table job_attempts (
  job_id bigint primary key,
  failures int not null,
  dead bool not null default false,
  retry_at timestamptz
);

-- name: claim_record
-- In the claim transaction, after `start`; returns the attempt this claim makes (failed
-- attempts so far + 1: a claim cut short by a crash is not a failed attempt).
insert into job_claims (job_id, worker, pid, claim)
values (%(job_id)s, %(worker)s, %(pid)s, %(claim)s)
returning (select coalesce(max(failures), 0) + 1 from job_attempts where job_id = %(job_id)s);

-- name: lease_take
-- In the claim transaction, after `start`: the lease ends lease_s after the job's work.
insert into job_leases (job_id, worker, pid, expires_at)
values (
  %(job_id)s, %(worker)s, %(pid)s,
  clock_timestamp() + make_interval(secs => %(work_s)s + %(lease_s)s)
);

-- name: lease_release
-- With `complete`, in one transaction: only the lease's holder completes the job. No row
-- means the lease expired and the job went back to the queue: someone else runs it.
delete from job_leases
where job_id = %(job_id)s and pid = %(pid)s;

-- name: claim_committed
-- After a reconnect: did this claim commit before the connection went? Its attempt if so.
select (select coalesce(max(failures), 0) + 1 from job_attempts where job_id = %(job_id)s)
from job_claims
where job_id = %(job_id)s and pid = %(pid)s and claim = %(claim)s;

-- name: job_status
select status from jobs where id = %(job_id)s;

-- name: fail_attempt
-- A failed attempt, in one transaction with `fail_job`: the failure counted and the
-- retry time set, the backoff doubling with each failure.
insert into job_attempts (job_id, failures, retry_at)
values (%(job_id)s, 1, clock_timestamp() + make_interval(secs => %(backoff_s)s))
on conflict (job_id) do update
set failures = job_attempts.failures + 1,
    retry_at = clock_timestamp()
      + make_interval(secs => %(backoff_s)s * power(2, job_attempts.failures))
returning failures;

-- name: fail_job
-- The job leaves `running`: 'retrying' (not 'queued', so no dequeue sees it before its
-- retry_at) or 'dead' after its last attempt. enqueued_at is kept: waits stay honest.
-- No row: a commit cut by a restart had done it already (the transaction rolls back).
update jobs
set status = case when %(dead)s then 'dead' else 'retrying' end,
    finished_at = case when %(dead)s then clock_timestamp() end
where id = %(job_id)s and status = 'running';

-- name: mark_dead
update job_attempts set dead = true, retry_at = null where job_id = %(job_id)s;

-- name: requeue_due
-- The runner's scheduler: jobs whose backoff has ended go back to the queue.
update jobs
set status = 'queued'
from job_attempts a
where a.job_id = jobs.id and jobs.status = 'retrying' and a.retry_at <= clock_timestamp()
returning jobs.id;

-- name: reap_expired
-- The runner's reaper: a job whose lease ran out goes back to the queue (at-least-once:
-- its holder may have done part of the work).
with expired as (
  delete from job_leases
  where expires_at < clock_timestamp()
  returning job_id
)
update jobs
set status = 'queued'
from expired
where jobs.id = expired.job_id and jobs.status = 'running'
returning jobs.id;

-- name: fault_claims
-- What the fault books read: every committed claim.
select job_id, worker, pid, claim, claimed_at from job_claims order by claimed_at;

-- name: fault_attempts
select job_id, failures, dead from job_attempts order by job_id;

-- name: progress
-- The runner's stop test: jobs finished for good, and jobs still held by killed workers.
select count(*) filter (where status in ('done', 'dead')),
       count(*) filter (where status = 'running' and id = any(%(held)s::bigint[]))
from jobs;
