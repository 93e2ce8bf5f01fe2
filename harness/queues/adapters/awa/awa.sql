-- What the awa adapter runs itself beside awa's own code (awa_adapter.py). awa keeps
-- everything in its own schema, awa (never the run's): each statement names it.

-- name: awa_activate
-- awa's queue storage made the active engine of the fresh install before any worker runs:
-- the post-migrate step its docs give external migration tooling (the first worker
-- would do it as it starts, and an enqueue before that is refused).
select awa.storage_auto_finalize_if_fresh('awa')

-- name: free_connections
-- The connections the server still accepts: max_connections, less those kept for
-- superusers and those open now but this one (the install's, closed before any worker
-- starts).
select current_setting('max_connections')::int
     - current_setting('superuser_reserved_connections')::int
     - (select count(*)
          from pg_stat_activity
         where backend_type = 'client backend' and pid <> pg_backend_pid())

-- name: awa_analyze_tables
-- Statistics on every table of awa's schema, as autovacuum would gather them in time.
select format('analyze %I.%I', schemaname, tablename)
  from pg_tables
 where schemaname = 'awa'

-- name: awa_ledger
-- awa keeps its jobs in its own schema, awa (never the run's), and shows them through
-- its compatibility view awa.jobs: created_at (now() of the enqueue's COPY),
-- attempted_at (the claim, clock_timestamp() in claim_ready_runtime), finalized_at (now()
-- of the completion batch that closed it: awa flushes completions every millisecond or
-- 512 of them). Finished jobs stay readable until awa's queue ring prunes their segment
-- (its default rotation, a second over 16 slots): the task log has the rest.
-- The view does not show a job claimed and not yet closed as running (awa#422): it
-- leaves it out (the suite's killed workers' jobs) or shows it available (a claim the
-- test makes by hand). A claim is a receipt, a row of lease_claims or an item of a
-- compact lease_claim_batches row, open until a closure row, a closure batch whose
-- receipt_ranges hold its receipt, or its attempt's done, deferred or dead-letter entry
-- closes it, or it moves to leases (which the view shows): the tests awa's own rescue
-- of stale receipts makes. A killed worker's job waits in one for that rescue, its
-- arguments in ready_entries; it is read as running, whatever the view says of it.
with viewed as (
    select id,
           (args ->> 'n')::bigint as job,
           (args ->> 't')::int as tenant,
           case
               when state = 'completed' then 'done'
               when state = 'running' then 'running'
               when state in ('failed', 'cancelled') then 'failed'
               else 'waiting'
           end as state,
           created_at,
           attempted_at,
           finalized_at
      from awa.jobs
     where kind = %(kind)s
),
claims as (
    select claim.claim_slot, claim.receipt_id, claim.job_id, claim.run_lease,
           claim.ready_slot, claim.ready_generation, claim.queue, claim.priority,
           claim.enqueue_shard, claim.lane_seq, claim.claimed_at
      from awa.lease_claims as claim
     where claim.closed_at is null
    union all
    select batch.claim_slot, item.receipt_id, item.job_id, item.run_lease,
           batch.ready_slot, batch.ready_generation, batch.queue, batch.priority,
           batch.enqueue_shard, item.lane_seq, batch.claimed_at
      from awa.lease_claim_batches as batch
     cross join lateral unnest(batch.job_ids, batch.run_leases, batch.receipt_ids, batch.lane_seqs)
           as item(job_id, run_lease, receipt_id, lane_seq)
),
held as (
    select distinct on (claims.job_id)
           claims.job_id, ready.args, ready.created_at, claims.claimed_at
      from claims
      join awa.ready_entries as ready
        on ready.ready_slot = claims.ready_slot
       and ready.ready_generation = claims.ready_generation
       and ready.queue = claims.queue
       and ready.priority = claims.priority
       and ready.enqueue_shard = claims.enqueue_shard
       and ready.lane_seq = claims.lane_seq
     where ready.kind = %(kind)s
       and not exists (select 1 from awa.lease_claim_closures as closure
                        where closure.claim_slot = claims.claim_slot
                          and closure.job_id = claims.job_id
                          and closure.run_lease = claims.run_lease)
       and not exists (select 1 from awa.lease_claim_closure_batches as closed
                        where closed.receipt_ranges @> claims.receipt_id)
       and not exists (select 1 from awa.done_entries as done
                        where done.job_id = claims.job_id and done.run_lease = claims.run_lease)
       and not exists (select 1 from awa.deferred_jobs as deferred
                        where deferred.job_id = claims.job_id
                          and deferred.run_lease = claims.run_lease)
       and not exists (select 1 from awa.dlq_entries as dlq
                        where dlq.job_id = claims.job_id and dlq.run_lease = claims.run_lease)
       and not exists (select 1 from awa.leases as lease
                        where lease.job_id = claims.job_id and lease.run_lease = claims.run_lease)
     order by claims.job_id, claims.run_lease desc
)
select viewed.id::text,
       viewed.job,
       viewed.tenant,
       case when held.job_id is null then viewed.state else 'running' end,
       viewed.created_at,
       coalesce(held.claimed_at, viewed.attempted_at),
       viewed.finalized_at
  from viewed
  left join held on held.job_id = viewed.id
union all
select held.job_id::text,
       (held.args ->> 'n')::bigint,
       (held.args ->> 't')::int,
       'running',
       held.created_at,
       held.claimed_at,
       null::timestamptz
  from held
 where not exists (select 1 from viewed where viewed.id = held.job_id)
