-- db-scheduler's adapter's SQL (docs/adapters.md), run by its Java program through JDBC
-- (`?` placeholders) with the run's schema as the search_path (JDBC's currentSchema).
-- db-scheduler itself runs its own statements (its fetch: docs/real-queues.md).

-- name: dbscheduler_tables
-- db-scheduler's table as its repository gives it for PostgreSQL at v16.7.1
-- (db-scheduler/src/test/resources/postgresql_tables.sql, which its README points users
-- to: "create the scheduled_tasks table"); the jar ships no DDL.
create table scheduled_tasks (
  task_name text not null,
  task_instance text not null,
  task_data bytea,
  execution_time timestamp with time zone not null,
  picked boolean not null,
  picked_by text,
  last_success timestamp with time zone,
  last_failure timestamp with time zone,
  consecutive_failures int,
  last_heartbeat timestamp with time zone,
  version bigint not null,
  priority smallint,
  primary key (task_name, task_instance)
);
create index execution_time_idx on scheduled_tasks (execution_time);
create index last_heartbeat_idx on scheduled_tasks (last_heartbeat);
create index priority_execution_time_idx on scheduled_tasks (priority desc, execution_time asc);

-- name: dbscheduler_server_clock
-- db-scheduler stamps its rows with its JVM's clock (execution_time, last_heartbeat: Java's
-- Instant.now()) and keeps no moment of an insert or a pick apart from them. Two columns
-- of the harness's own, written by the server's clock: when the row was inserted, and
-- when db-scheduler last set it picked (its pick, or lock-and-fetch's update). Its own
-- columns, its order and its statements are untouched (it names its columns in its
-- insert and reads its rows by column name).
alter table scheduled_tasks
  add column harness_enqueued_at timestamptz not null default clock_timestamp(),
  add column harness_picked_at timestamptz;
create function scheduled_tasks_picked_at() returns trigger language plpgsql as $$
begin
  new.harness_picked_at := clock_timestamp();
  return new;
end $$;
create trigger scheduled_tasks_picked_at before update of picked on scheduled_tasks
  for each row when (new.picked and not old.picked)
  execute function scheduled_tasks_picked_at();

-- name: dbscheduler_moments
-- A run of the task, at the end of its work: its execution's moments, read from its row
-- (which db-scheduler deletes once the run returns) and the server's clock.
select harness_enqueued_at::text, harness_picked_at::text, clock_timestamp()::text
from scheduled_tasks
where task_name = ? and task_instance = ?;

-- name: dbscheduler_ledger
-- The executions db-scheduler still holds: it deletes a one-time task's row when its run
-- succeeds, so every row left is a job not done (picked: running; else waiting, its
-- retries included: a one-time task is retried, never failed for good). Its payload is
-- the task_data JSON the adapter gave db-scheduler's GsonSerializer.
select task_name || '/' || task_instance,
       (convert_from(task_data, 'UTF8')::jsonb ->> 'n')::bigint,
       (convert_from(task_data, 'UTF8')::jsonb ->> 't')::int,
       case when picked then 'running' else 'waiting' end,
       harness_enqueued_at::text,
       harness_picked_at::text
from scheduled_tasks
order by harness_enqueued_at;
