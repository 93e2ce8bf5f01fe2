-- The article's schema ("The setup"), created fresh in the run's own schema for every
-- repetition. The one addition is jobs.duration_ms: the simulated work's length, which a
-- real queue would carry in the job's payload.

-- name: jobs
create table jobs (
  id bigint generated always as identity primary key,
  tenant_id int not null,
  status text not null default 'queued',
  enqueued_at timestamptz not null default clock_timestamp(),
  started_at timestamptz,
  finished_at timestamptz,
  duration_ms double precision not null default 0
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
