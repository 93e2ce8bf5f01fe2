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

-- name: dbos_enqueue
-- A batch through DBOS's own SQL enqueue (`enqueue_workflow`, the function its system
-- schema ships for enqueueing from SQL), one call per job in one statement: created_at
-- is now() of the statement for every job of the batch. The workflow id carries the
-- harness's number (zero-padded, so that text order is number order: DBOS breaks ties
-- of a partition's created_at by id) and the tenant; the partition key, where the
-- mapping has one, is the tenant.
select enqueue_workflow(
         workflow_name => %(workflow)s,
         queue_name => %(queue)s,
         positional_args => array[to_json(job.n), to_json(job.t), to_json(job.ms)],
         workflow_id => lpad(job.n::text, 10, '0') || ':' || job.t,
         queue_partition_key => case when %(partitioned)s then job.t::text end)
  from unnest(%(numbers)s::bigint[], %(tenants)s::int[], %(ms)s::float8[]) as job(n, t, ms)

-- name: dbos_ledger
-- DBOS keeps every workflow in workflow_status, with epoch milliseconds each the now()
-- of a transaction: created_at (the enqueue), started_at_epoch_ms (the dequeue that
-- claimed it), completed_at (the one that recorded its outcome). now() is when the
-- transaction began, and the dequeue's runs several statements, each seeing what was
-- committed by then: a job enqueued after the dequeue began and claimed by it reads a
-- start before its enqueue. Its start is then its enqueue (a wait of 0), the nearest
-- moment DBOS's stamps allow. The workflow id is '<number>:<tenant>' (dbos_enqueue).
select workflow_uuid,
       split_part(workflow_uuid, ':', 1)::bigint,
       split_part(workflow_uuid, ':', 2)::int,
       status = 'SUCCESS',
       to_timestamp(created_at / 1000.0),
       to_timestamp(greatest(started_at_epoch_ms, created_at) / 1000.0),
       to_timestamp(completed_at / 1000.0)
  from workflow_status
 where queue_name = %(queue)s

-- name: awa_activate
-- awa's queue storage made the active engine of the fresh install before any worker runs:
-- the post-migrate step its docs give external migration tooling (the first worker
-- would do it as it starts, and an enqueue before that is refused).
select awa.storage_auto_finalize_if_fresh('awa')

-- name: free_connections
-- The connections the server still accepts: max_connections, less those kept for
-- superusers and those open now.
select current_setting('max_connections')::int
     - current_setting('superuser_reserved_connections')::int
     - (select count(*) from pg_stat_activity where backend_type = 'client backend')

-- name: awa_ledger
-- awa keeps its jobs in its own schema, awa (never the run's), and shows them through
-- its compatibility view awa.jobs: created_at (now() of the enqueue's COPY),
-- attempted_at (the claim, clock_timestamp() in claim_ready_runtime), finalized_at (now()
-- of the completion batch that closed it: awa flushes completions every millisecond or
-- 512 of them). Finished jobs stay readable until awa's queue ring prunes their segment,
-- which the worker's rotation interval keeps beyond the run (awa_queue.py).
select id::text,
       (args ->> 'n')::bigint,
       (args ->> 't')::int,
       state = 'completed',
       created_at,
       attempted_at,
       finalized_at
  from awa.jobs
 where kind = %(kind)s

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
-- Statistics on every table of the run's schema (or of the schema a library keeps its
-- tables in) after a backlog load, as after the SQL strategies' load (and as autovacuum
-- would gather them in time).
select format('analyze %%I.%%I', schemaname, tablename)
  from pg_tables
 where schemaname = coalesce(%(schema)s, current_schema())
