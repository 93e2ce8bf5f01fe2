-- What the adapter reads of procrastinate's own tables, in the run's schema (the
-- connection's search_path), once the workers have stopped.

-- name: procrastinate_ledger
-- Every job: its id, the harness's number and tenant (its args), its state, and its
-- moments. procrastinate_jobs has no timestamps; its events table has one per
-- transition, each now() of the transaction that made it (deferred: the insert,
-- started: the fetch, succeeded: the finish). now() is when the transaction began, and
-- the fetch is a PL/pgSQL function (procrastinate_fetch_job_v2) whose query takes its
-- own snapshot after that: a job deferred once the fetch had begun, and claimed by it,
-- reads a start before its deferral (seen in a run of make test on a busy machine,
-- which failed its books). Its start is then its deferral (a wait of 0), the nearest
-- moment procrastinate's stamps allow; a job never started keeps no start.
select jobs.id::text,
       (jobs.args ->> 'n')::bigint,
       (jobs.args ->> 't')::int,
       case jobs.status
         when 'succeeded' then 'done'
         when 'todo' then 'waiting'
         when 'doing' then 'running'
         else 'failed'
       end,
       min(events.at) filter (where events.type = 'deferred'),
       case when bool_or(events.type = 'started') then
         greatest(min(events.at) filter (where events.type = 'started'),
                  min(events.at) filter (where events.type = 'deferred'))
       end,
       max(events.at) filter (where events.type = 'succeeded')
  from procrastinate_jobs as jobs
  left join procrastinate_events as events on events.job_id = jobs.id
 where jobs.task_name = 'harness_job'  -- not a periodic task's own (retry_stalled_jobs)
 group by jobs.id
