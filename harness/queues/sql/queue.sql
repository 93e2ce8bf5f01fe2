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
insert into jobs (tenant_id)
select tenant_id from unnest(%(tenant_ids)s::int[]) as b (tenant_id);

-- name: start
-- Second statement of the claim transaction: the job chosen by `dequeue` is running.
update jobs
set status = 'running', started_at = clock_timestamp()
where id = %(job_id)s and status = 'queued';

-- name: complete
-- After the work, outside the claim transaction.
update jobs
set status = 'done', finished_at = clock_timestamp()
where id = %(job_id)s and status = 'running';

-- name: books
-- What the books check reads after a repetition: every job and its timestamps.
select id, tenant_id, status, enqueued_at, started_at, finished_at
from jobs
order by id;

-- name: backlog_tenants
-- A pre-loaded backlog's tenants, idle ones included, in one statement. Only the order
-- of last_served matters: rotation position 1 was served longest ago.
insert into queue_tenants (tenant_id, last_served)
select tenant_id, timestamptz '2026-01-01 00:00:00+00' + make_interval(secs => position)
from unnest(%(tenant_ids)s::int[], %(rotation)s::int[]) as t (tenant_id, position);

-- name: backlog_jobs
-- The backlog's jobs, set-based: tenant by tenant in the given order, so job ids ascend
-- in it (the large tenant's 100,000 jobs first, as in the article).
insert into jobs (tenant_id)
select t.tenant_id
from unnest(%(tenant_ids)s::int[], %(jobs)s::int[]) with ordinality as t (tenant_id, jobs, n)
cross join lateral generate_series(1, t.jobs)
order by t.n;

-- name: after_load
-- Statistics for the planner, and a table autovacuum will not touch during the captures.
vacuum (analyze) jobs, queue_tenants;
