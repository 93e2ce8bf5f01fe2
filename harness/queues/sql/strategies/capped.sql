-- extends: round_robin
-- Round-robin with a cap on concurrent jobs per tenant (the scenario's tenant_cap): at
-- most N jobs of one tenant run at once, across all workers.
--
-- queue_tenants.running counts the tenant's jobs between claim and completion. The
-- dequeue skips tenants at the cap, but two workers can read the same count at once;
-- what enforces the cap is `served`: it increments the count only while it is below the
-- cap, under the tenant row's lock, re-checking the newest committed count after waiting
-- for a concurrent claim (READ COMMITTED re-evaluates the WHERE on the updated row). If
-- it changes no row, the worker rolls the claim back and dequeues again (a lost race),
-- so no claim ever commits past the cap. `complete` decrements the count in the same
-- statement that marks the job done.

-- name: setup
alter table queue_tenants add column running int not null default 0 check (running >= 0);

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
where qt.running < %(tenant_cap)s
order by qt.last_served
limit 1;

-- name: served
update queue_tenants
set last_served = clock_timestamp(), running = running + 1
where tenant_id = %(tenant_id)s and running < %(tenant_cap)s;

-- name: complete
with done as (
  update jobs
  set status = 'done', finished_at = clock_timestamp()
  where id = %(job_id)s and status = 'running'
  returning tenant_id
)
update queue_tenants qt
set running = running - 1
from done
where qt.tenant_id = done.tenant_id;
