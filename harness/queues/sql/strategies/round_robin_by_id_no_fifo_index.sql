-- extends: round_robin_by_id
-- The trap with jobs_queued_fifo dropped. It does not help: the planner walks the primary
-- key in id order instead, filtering on tenant_id and status, in about the same time.

-- name: setup
drop index jobs_queued_fifo;
