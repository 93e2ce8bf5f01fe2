-- The article's schema ("The setup"), exactly, created fresh in the run's own schema for
-- every repetition and every plan capture. A job's simulated duration is not stored:
-- workers know it from the job's tenant (harness/workload.py), so the table's rows are
-- as wide as the article's and its buffer counts comparable.

-- name: jobs
create table jobs (
  id bigint generated always as identity primary key,
  tenant_id int not null,
  status text not null default 'queued',
  enqueued_at timestamptz not null default clock_timestamp(),
  started_at timestamptz,
  finished_at timestamptz
);

-- name: jobs_queued_fifo
create index jobs_queued_fifo on jobs (id) where status = 'queued';

-- name: queue_tenants
create table queue_tenants (
  tenant_id int primary key,
  last_served timestamptz not null default '-infinity'
);

-- name: queue_tenants_last_served
create index on queue_tenants (last_served);

-- name: jobs_queued_tenant
-- The per-tenant index of the article's fix: only it can deliver a tenant's jobs in
-- (enqueued_at, id) order, so the round-robin probe is one short descent.
create index jobs_queued_tenant
  on jobs (tenant_id, enqueued_at, id)
  where status = 'queued';
