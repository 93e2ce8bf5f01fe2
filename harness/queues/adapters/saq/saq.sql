-- What the adapter reads of saq's own tables, in the run's schema (the connection's
-- search_path), once the workers have stopped.

-- name: saq_ledger
-- saq keeps a finished job in saq_jobs for its ttl (600 s, its default: its sweep, every
-- 60 s, deletes it after; the task log has each job it ran), the job itself a JSON
-- document in the bytea `job`: queued, started and completed are epoch milliseconds
-- from its processes' clocks (time.time(): the enqueuer's at the enqueue, the worker's
-- when its task starts and when it is finished), the harness's number in its kwargs.
select key,
       (data -> 'kwargs' ->> 'n')::bigint,
       (data -> 'kwargs' ->> 't')::int,
       case status
         when 'complete' then 'done'
         when 'active' then 'running'
         when 'aborting' then 'running'
         when 'failed' then 'failed'
         when 'aborted' then 'failed'
         else 'waiting'
       end,
       to_timestamp((data ->> 'queued')::bigint / 1000.0),
       to_timestamp((data ->> 'started')::bigint / 1000.0),
       to_timestamp((data ->> 'completed')::bigint / 1000.0)
  from saq_jobs
 cross join lateral (select convert_from(job, 'UTF8')::jsonb) as saved (data)
