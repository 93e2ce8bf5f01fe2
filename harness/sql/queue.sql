-- Statements every strategy shares. A strategy file may override any of these blocks by
-- defining a block of the same name; `harness sql STRATEGY` prints the merged result.
-- Parameters use psycopg's %(name)s placeholders.

-- name: enqueue
-- One statement per batch: the jobs, and their tenants registered for round-robin
-- ("one insert ... on conflict do nothing"). enqueued_at comes from clock_timestamp(),
-- so every row of a batch carries the moment it was written.
with registered as (
  insert into queue_tenants (tenant_id)
  select distinct tenant_id from unnest(%(tenant_ids)s::int[]) as t (tenant_id)
  on conflict do nothing
)
insert into jobs (tenant_id, duration_ms)
select tenant_id, duration_ms
from unnest(%(tenant_ids)s::int[], %(durations_ms)s::float8[]) as b (tenant_id, duration_ms);

-- name: start
-- Second statement of the claim transaction: the job chosen by `dequeue` is running.
update jobs
set status = 'running', started_at = clock_timestamp()
where id = %(job_id)s
returning duration_ms;

-- name: complete
-- After the work, outside the claim transaction.
update jobs
set status = 'done', finished_at = clock_timestamp()
where id = %(job_id)s and status = 'running';

-- name: books
-- What the books check reads after a repetition: every job and its timestamps.
select id, tenant_id, status, enqueued_at, started_at, finished_at, duration_ms
from jobs
order by id;
