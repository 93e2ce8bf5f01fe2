-- extends: round_robin
-- Weighted fair queueing by stride scheduling: each tenant has a weight (its tier: free 1,
-- paid 2) and a virtual time, `pass`. The dequeue serves the tenant with the smallest
-- pass; serving it advances its pass by 1 / weight. While two tenants are both
-- backlogged, a tenant of weight 2 is therefore served twice for each turn of a tenant of
-- weight 1. A tenant that registers starts at the smallest pass in the table, so a
-- newcomer joins the rotation instead of owning it until it catches up.
-- As in round_robin, the lock sits in the sub-select: a locked job skips that job only.

-- name: setup
alter table queue_tenants
  add column weight int not null default 1 check (weight > 0),
  add column pass double precision not null default 0;
create index queue_tenants_pass on queue_tenants (pass, tenant_id);

-- name: enqueue
with tiers as (
  select distinct tenant_id, weight
  from unnest(%(tenant_ids)s::int[], %(weights)s::int[]) as t (tenant_id, weight)
), registered as (
  insert into queue_tenants (tenant_id, weight, pass)
  select tenant_id, weight, coalesce((select min(pass) from queue_tenants), 0) from tiers
  on conflict do nothing
)
insert into jobs (tenant_id)
select tenant_id from unnest(%(tenant_ids)s::int[]) as b (tenant_id);

-- name: dequeue
select j.id, qt.tenant_id
from queue_tenants qt
cross join lateral (
  select id from jobs
  where tenant_id = qt.tenant_id and status = 'queued'
  order by enqueued_at, id
  limit 1
  for update skip locked
) j
order by qt.pass, qt.tenant_id
limit 1;

-- name: served
update queue_tenants
set last_served = clock_timestamp(), pass = pass + 1.0 / weight
where tenant_id = %(tenant_id)s;

-- name: backlog_tenants
insert into queue_tenants (tenant_id, last_served, weight, pass)
select tenant_id, timestamptz '2026-01-01 00:00:00+00' + make_interval(secs => position),
       weight, position * 1e-9
from unnest(%(tenant_ids)s::int[], %(rotation)s::int[], %(weights)s::int[])
  as t (tenant_id, position, weight);
