-- extends: round_robin
-- Priorities across tenants, round-robin among tenants within a priority. Jobs carry a
-- priority (their tenant group's); the rotation's unit is (tenant, priority), so the
-- dequeue walks the rotation highest priority first and, within a priority, by
-- last_served, and stops at the first entry with a free job: no lower-priority job is
-- taken while a higher-priority one is free. As in the article's query, the Limit sits
-- over an index walk (queue_tenants_priority), so tenants are not sorted before it.

-- name: setup
alter table jobs add column priority int not null default 0;
alter table queue_tenants drop constraint queue_tenants_pkey,
  add column priority int not null default 0,
  add primary key (tenant_id, priority);
create index queue_tenants_priority on queue_tenants (priority desc, last_served);
create index jobs_queued_tenant_priority
  on jobs (tenant_id, priority, enqueued_at, id)
  where status = 'queued';

-- name: enqueue
with registered as (
  insert into queue_tenants (tenant_id, priority)
  select distinct tenant_id, priority
  from unnest(%(tenant_ids)s::int[], %(priorities)s::int[]) as t (tenant_id, priority)
  on conflict do nothing
)
insert into jobs (tenant_id, priority)
select tenant_id, priority
from unnest(%(tenant_ids)s::int[], %(priorities)s::int[]) as b (tenant_id, priority);

-- name: dequeue
select j.id, qt.tenant_id
from queue_tenants qt
cross join lateral (
  select id from jobs
  where tenant_id = qt.tenant_id and priority = qt.priority and status = 'queued'
  order by enqueued_at, id
  limit 1
  for update skip locked
) j
order by qt.priority desc, qt.last_served
limit 1;

-- name: served
update queue_tenants qt
set last_served = clock_timestamp()
from jobs j
where j.id = %(job_id)s and qt.tenant_id = j.tenant_id and qt.priority = j.priority;

-- name: backlog_tenants
insert into queue_tenants (tenant_id, priority, last_served)
select tenant_id, priority,
       timestamptz '2026-01-01 00:00:00+00' + make_interval(secs => position)
from unnest(%(tenant_ids)s::int[], %(rotation)s::int[], %(priorities)s::int[])
  as t (tenant_id, position, priority);

-- name: backlog_jobs
insert into jobs (tenant_id, priority)
select t.tenant_id, t.priority
from unnest(%(tenant_ids)s::int[], %(jobs)s::int[], %(priorities)s::int[])
  with ordinality as t (tenant_id, jobs, priority, n)
cross join lateral generate_series(1, t.jobs)
order by t.n;
