-- The yardstick of `harness check`: timed beside every claim, in the same state, so
-- that claim latency is compared as a ratio and a slower machine is not a regression.

-- name: reference
-- A primary-key lookup that locks its row: the same machinery as a claim (a transaction,
-- an index descent, a row lock), with none of the strategy's choices in it.
select id, tenant_id from jobs where id = %(job_id)s for update;
