-- What the awa adapter runs itself beside awa's own code (awa_adapter.py). awa keeps
-- everything in its own schema, awa (never the run's): each statement names it.

-- name: awa_activate
-- awa's queue storage made the active engine of the fresh install before any worker runs:
-- the post-migrate step its docs give external migration tooling (the first worker
-- would do it as it starts, and an enqueue before that is refused).
select awa.storage_auto_finalize_if_fresh('awa')

-- name: free_connections
-- The connections the server still accepts: max_connections, less those kept for
-- superusers and those open now but this one (the install's, closed before any worker
-- starts).
select current_setting('max_connections')::int
     - current_setting('superuser_reserved_connections')::int
     - (select count(*)
          from pg_stat_activity
         where backend_type = 'client backend' and pid <> pg_backend_pid())

-- name: awa_analyze_tables
-- Statistics on every table of awa's schema, as autovacuum would gather them in time.
select format('analyze %I.%I', schemaname, tablename)
  from pg_tables
 where schemaname = 'awa'

-- name: awa_ledger
-- awa keeps its jobs in its own schema, awa (never the run's), and shows them through
-- its compatibility view awa.jobs: created_at (now() of the enqueue's COPY),
-- attempted_at (the claim, clock_timestamp() in claim_ready_runtime), finalized_at (now()
-- of the completion batch that closed it: awa flushes completions every millisecond or
-- 512 of them). Finished jobs stay readable until awa's queue ring prunes their segment,
-- which the worker's rotation interval keeps beyond the run (awa_adapter.py).
select id::text,
       (args ->> 'n')::bigint,
       (args ->> 't')::int,
       case when state = 'completed' then 'done' else 'waiting' end,
       created_at,
       attempted_at,
       finalized_at
  from awa.jobs
 where kind = %(kind)s
