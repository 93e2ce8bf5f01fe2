-- The ledgers of the queue libraries: every job as the library's own tables record it,
-- read in the run's schema (the connection's search_path) once the workers have stopped.
-- Each returns: library_id, job (the harness's number, from the payload), tenant, done,
-- enqueued_at, started_at, finished_at.

-- name: procrastinate_ledger
-- procrastinate_jobs has no timestamps; its events table has one per transition, each
-- now() of the transaction that made it (deferred: the insert, started: the fetch,
-- succeeded: the finish).
select jobs.id::text,
       (jobs.args ->> 'n')::bigint,
       (jobs.args ->> 't')::int,
       jobs.status = 'succeeded',
       min(events.at) filter (where events.type = 'deferred'),
       min(events.at) filter (where events.type = 'started'),
       max(events.at) filter (where events.type = 'succeeded')
  from procrastinate_jobs as jobs
  left join procrastinate_events as events on events.job_id = jobs.id
 group by jobs.id

-- name: pgqueuer_ledger
-- A finished job is deleted from pgqueuer and kept only in pgqueuer_log, one row per
-- status, each created = now() of its statement (queued: the enqueue, picked: the dequeue,
-- successful: the flush of the completion buffer). The payload goes with the job, so the
-- number of a finished job comes from the task log; an unfinished one still has it.
select log.job_id::text,
       (convert_from(queue.payload, 'UTF8')::jsonb ->> 'n')::bigint,
       (convert_from(queue.payload, 'UTF8')::jsonb ->> 't')::int,
       bool_or(log.status = 'successful'),
       min(log.created) filter (where log.status = 'queued'),
       min(log.created) filter (where log.status = 'picked'),
       max(log.created) filter (where log.status = 'successful')
  from pgqueuer_log as log
  left join pgqueuer as queue on queue.id = log.job_id
 group by log.job_id, queue.payload

-- name: pgboss_ledger
-- pg-boss keeps completed jobs (until its retention deletes them, days later), with
-- created_on, started_on and completed_on, each job_now() (now()) of its statement.
select id::text,
       (data ->> 'n')::bigint,
       (data ->> 't')::int,
       state = 'completed',
       created_on,
       started_on,
       completed_on
  from job
 where name = 'harness'

-- name: graphile_done_log
-- graphile-worker deletes a job when its task succeeds, so its finished jobs are kept by
-- the harness as they go: a row per deleted job, with the job's own times (created_at;
-- locked_at, when graphile-worker locked it for a worker or its local queue) and the
-- server's clock when graphile-worker deleted it (its completion, batched with
-- completeJobBatchDelay). A statement trigger inside graphile-worker's own delete, one
-- insert per statement from its transition table: no round trip of the task's (which,
-- one per job, capped the drain at a fifth of the library's rate), and no call per row
-- (which cost about a tenth of it). In the run's schema (the function keeps it as its
-- search_path: graphile-worker's sessions have their own), dropped with it.
create table harness_graphile_done (
  id bigint primary key,
  payload json not null,
  created_at timestamptz not null,
  locked_at timestamptz,
  finished_at timestamptz not null
);
create function harness_graphile_done() returns trigger language plpgsql
  set search_path from current as $$
begin
  insert into harness_graphile_done
  select id, payload, created_at, locked_at, clock_timestamp() from deleted;
  return null;
end
$$;
create trigger harness_graphile_done after delete on _private_jobs
  referencing old table as deleted
  for each statement execute function harness_graphile_done();

-- name: graphile_ledger
-- The finished jobs from the harness's log of graphile-worker's deletions; the jobs left
-- in _private_jobs are unfinished.
select id::text,
       (payload ->> 'n')::bigint,
       (payload ->> 't')::int,
       true,
       created_at,
       locked_at,
       finished_at
  from harness_graphile_done
 union all
select id::text,
       (payload ->> 'n')::bigint,
       (payload ->> 't')::int,
       false,
       created_at,
       locked_at,
       null::timestamptz
  from _private_jobs

-- name: analyze_tables
-- Statistics on every table of the run's schema after a backlog load, as after the SQL
-- strategies' load (and as autovacuum would gather them in time).
select format('analyze %I.%I', schemaname, tablename)
  from pg_tables
 where schemaname = current_schema()
