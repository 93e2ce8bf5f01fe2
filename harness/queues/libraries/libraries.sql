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

-- name: graphile_ledger
-- graphile-worker deletes a job when its task succeeds: what is left is unfinished. The
-- finished ones are in the task log, their times read by the task (created_at, locked_at
-- and clock_timestamp() at the end of the work) before it returned.
select id::text,
       (payload ->> 'n')::bigint,
       (payload ->> 't')::int,
       false,
       created_at,
       locked_at,
       null::timestamptz
  from _private_jobs

-- name: pgmq_ledger
-- pgmq keeps a message in its queue table q_harness until it is archived into a_harness
-- (the harness's worker archives each one when its task is done, as pgmq-py's docs
-- show): enqueued_at is now() of the send, last_read_at clock_timestamp() of the read
-- that handed it out (the last read: a message read twice is two task runs), archived_at
-- now() of the archive. A message still in the queue is unfinished.
select msg_id::text,
       (message ->> 'n')::bigint,
       (message ->> 't')::int,
       true,
       enqueued_at,
       last_read_at,
       archived_at
  from a_harness
union all
select msg_id::text,
       (message ->> 'n')::bigint,
       (message ->> 't')::int,
       false,
       enqueued_at,
       last_read_at,
       null::timestamptz
  from q_harness

-- name: saq_ledger
-- saq keeps a finished job in saq_jobs (its ttl, 0 here: kept), the job itself a JSON
-- document in the bytea `job`: queued, started and completed are epoch milliseconds
-- from its processes' clocks (time.time(): the enqueuer's at the enqueue, the worker's
-- when its task starts and when it is finished), the harness's number in its kwargs.
select key,
       (data -> 'kwargs' ->> 'n')::bigint,
       (data -> 'kwargs' ->> 't')::int,
       status = 'complete',
       to_timestamp((data ->> 'queued')::bigint / 1000.0),
       to_timestamp((data ->> 'started')::bigint / 1000.0),
       to_timestamp((data ->> 'completed')::bigint / 1000.0)
  from saq_jobs
 cross join lateral (select convert_from(job, 'UTF8')::jsonb) as saved (data)

-- name: analyze_tables
-- Statistics on every table of the run's schema after a backlog load, as after the SQL
-- strategies' load (and as autovacuum would gather them in time).
select format('analyze %I.%I', schemaname, tablename)
  from pg_tables
 where schemaname = current_schema()
