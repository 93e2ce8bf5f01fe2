-- What the river adapter runs itself beside River's own code (river.go): River's tables
-- are its migrations' (rivermigrate, into the run's schema); these run with the run's
-- schema as the connection's search_path.

-- name: finished_at_from_the_server
-- River stamps a job's finalized_at with its worker process's clock (its completer's
-- time.Now(), riverdriver.JobSetStateCompleted), where the contract times everything by
-- the server's: the moment River's completer writes it is stamped with the server's
-- clock_timestamp() instead, as the row is written (its completer writes completions in
-- batches, every 50 ms at most: the finish is when River recorded it). Only the
-- statements that set finalized_at (completions, discards, cancellations) fire it; its
-- fetch, which does not, never does. In the run's schema, dropped with it.
create function harness_river_finalized_now() returns trigger language plpgsql as $$
begin
  new.finalized_at := clock_timestamp();
  return new;
end
$$;
create trigger harness_river_finalized_now
  before update of finalized_at on river_job
  for each row when (new.finalized_at is not null and old.finalized_at is null)
  execute function harness_river_finalized_now();

-- name: ledger
-- River keeps every job in river_job until its cleaner deletes it (completed jobs after
-- CompletedJobRetentionPeriod, 24 hours by default): created_at is now() of the
-- InsertMany that inserted it, attempted_at now() of the fetch that took it last
-- (JobGetAvailable), finalized_at the server's clock as River's completer wrote it (the
-- trigger above). Its states as the contract's: completed is done; running is running;
-- available, scheduled, retryable (an error or a rescue waiting for its retry) and
-- pending wait; discarded and cancelled failed.
select id::text,
       (args ->> 'n')::bigint,
       (args ->> 't')::int,
       case
           when state = 'completed' then 'done'
           when state = 'running' then 'running'
           when state in ('discarded', 'cancelled') then 'failed'
           else 'waiting'
       end,
       created_at::text,
       attempted_at::text,
       case when state = 'completed' then finalized_at::text end
  from river_job
 where kind = $1
