-- What the pgqueuer adapter reads of pgqueuer's own tables (pgqueuer_adapter.py). Its
-- install, enqueue and dequeue are pgqueuer's code; these run with the run's schema as
-- the search_path, where pgqueuer's tables are (DBSettings.db_schema).

-- name: pgqueuer_ledger
-- A finished job is deleted from pgqueuer and kept only in pgqueuer_log, one row per
-- status, each created = now() of its statement (queued: the enqueue, picked: the dequeue,
-- successful: the flush of the completion buffer). The payload goes with the job, so the
-- number of a finished job comes from the task log; an unfinished one still has it, and
-- its status: queued (waiting) or picked (running: held by a worker, alive or not).
select log.job_id::text,
       (convert_from(queue.payload, 'UTF8')::jsonb ->> 'n')::bigint,
       (convert_from(queue.payload, 'UTF8')::jsonb ->> 't')::int,
       case when bool_or(log.status = 'successful') then 'done'
            -- picked: held by a worker (its heartbeat, if it is alive; re-picked by a
            -- dequeue once the heartbeat is older than heartbeat_timeout)
            when queue.status = 'picked' then 'running'
            when bool_or(log.status in ('exception', 'failed', 'canceled', 'deleted'))
                 then 'failed'
            else 'waiting' end,
       min(log.created) filter (where log.status = 'queued'),
       min(log.created) filter (where log.status = 'picked'),
       max(log.created) filter (where log.status = 'successful')
  from pgqueuer_log as log
  left join pgqueuer as queue on queue.id = log.job_id
 group by log.job_id, queue.payload, queue.status
