-- Round-robin per tenant, as fixed in the article: the tenant that has waited longest
-- (queue_tenants.last_served) gives up its oldest free job. The lock sits in the
-- sub-select, so a locked job skips only that job, not the tenant, and a large tenant
-- keeps every worker busy when it is alone. Ordering the sub-select by (enqueued_at, id)
-- is what makes each probe one short descent into jobs_queued_tenant; ordered by id, the
-- planner walks the global FIFO index instead (the article's 10-second trap).

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
order by qt.last_served
limit 1;

-- name: served
-- In the same claim transaction: this tenant goes to the back of the rotation.
update queue_tenants
set last_served = clock_timestamp()
where tenant_id = %(tenant_id)s;
