-- graphile-worker deletes a job when its task succeeds, so the adapter keeps its finished
-- jobs as they go: a row per deleted job, with the job's own times (created_at; locked_at,
-- when graphile-worker locked it for a worker or its local queue) and the server's clock
-- when graphile-worker deleted it (its completion, batched with completeJobBatchDelay).
-- A statement trigger inside graphile-worker's own delete, one insert per statement from
-- its transition table: no round trip of the task's per job (which capped the drain at a
-- fifth of the library's rate), and no call per row (which cost about a tenth of it). In
-- the run's schema (the function keeps it as its search_path: graphile-worker's sessions
-- have their own), dropped with it. Run by the install role with the run's schema first
-- on the search_path.
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
