-- FIFO: the oldest job nobody else has locked, whoever it belongs to. The article's
-- standard dequeue query, verbatim. Walks jobs_queued_fifo in id order.

-- name: dequeue
select id, tenant_id
from jobs
where status = 'queued'
order by id
limit 1
for update skip locked;
