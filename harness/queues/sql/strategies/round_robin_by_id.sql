-- extends: round_robin
-- The article's trap: round-robin with the sub-select ordered by id, "the natural choice".
-- The planner assumes an average tenant and walks jobs_queued_fifo in id order, filtering
-- on tenant_id. For the large tenant that finds a job at once; for a small tenant it walks
-- past the large tenant's whole backlog, and for an idle tenant it walks all of it for
-- nothing, once per idle tenant ahead in the rotation: about a million buffers and ten
-- seconds per dequeue with 100,000 queued jobs and 989 idle tenants.

-- name: dequeue
select j.id, qt.tenant_id
from queue_tenants qt
cross join lateral (
  select id from jobs
  where tenant_id = qt.tenant_id and status = 'queued'
  order by id
  limit 1
  for update skip locked
) j
order by qt.last_served
limit 1;
