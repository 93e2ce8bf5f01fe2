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

-- name: analyze_tables
-- Statistics on every table of the run's schema after a backlog load, as after the SQL
-- strategies' load (and as autovacuum would gather them in time).
select format('analyze %I.%I', schemaname, tablename)
  from pg_tables
 where schemaname = current_schema()
