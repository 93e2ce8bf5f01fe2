-- The statements the DBOS adapter runs itself: its enqueue through DBOS's own SQL function,
-- and its ledger read from DBOS's own table. DBOS's system tables and functions are in the
-- run's schema (dbos_system_schema), and these run with that schema as the search_path.

-- name: dbos_enqueue
-- A batch through DBOS's own SQL enqueue (`enqueue_workflow`, the function its system
-- schema ships for enqueueing from SQL), one call per job in one statement: created_at
-- is now() of the statement for every job of the batch. The function writes the inputs
-- as JSON (serialization 'portable_json'), the only serialization the worker reads. The
-- workflow id carries the harness's number (zero-padded, so that text order is number
-- order: DBOS breaks ties of a partition's created_at by id) and the tenant; the
-- partition key, where the mapping has one, is the tenant.
select enqueue_workflow(
         workflow_name => %(workflow)s,
         queue_name => %(queue)s,
         positional_args => array[to_json(job.n), to_json(job.t), to_json(job.ms)],
         workflow_id => lpad(job.n::text, 10, '0') || ':' || job.t,
         queue_partition_key => case when %(partitioned)s then job.t::text end)
  from unnest(%(numbers)s::bigint[], %(tenants)s::int[], %(ms)s::float8[]) as job(n, t, ms)

-- name: dbos_ledger
-- DBOS keeps every workflow in workflow_status, with epoch milliseconds each the now()
-- of a transaction: created_at (the enqueue), started_at_epoch_ms (the dequeue that
-- claimed it), completed_at (the one that recorded its outcome). now() is when the
-- transaction began, and the dequeue's runs several statements, each seeing what was
-- committed by then: a job enqueued after the dequeue began and claimed by it reads a
-- start before its enqueue. Its start is then its enqueue (a wait of 0), the nearest
-- moment DBOS's stamps allow; a workflow never started keeps no start. The workflow id
-- is '<number>:<tenant>' (dbos_enqueue).
-- Its status as the contract's state: ENQUEUED and DELAYED wait, PENDING runs, ERROR
-- (a refused input among them), CANCELLED and MAX_RECOVERY_ATTEMPTS_EXCEEDED failed.
select workflow_uuid,
       split_part(workflow_uuid, ':', 1)::bigint,
       split_part(workflow_uuid, ':', 2)::int,
       case status
         when 'SUCCESS' then 'done'
         when 'ENQUEUED' then 'waiting'
         when 'DELAYED' then 'waiting'
         when 'PENDING' then 'running'
         else 'failed'
       end,
       to_timestamp(created_at / 1000.0),
       to_timestamp(case when started_at_epoch_ms is not null
                         then greatest(started_at_epoch_ms, created_at) end / 1000.0),
       to_timestamp(completed_at / 1000.0)
  from workflow_status
 where queue_name = %(queue)s
