-- Tenant isolation: SET vs SET LOCAL (harness isolation). A queue of jobs, each owned by
-- a tenant, and a tenant-owned table under row-level security. The harness creates both
-- in its own schema as the admin (the tables' owner) and runs every job as a role of its
-- own that is neither owner nor superuser, so the policy applies to it.
-- Placeholders: {schema}, {role}, {password}, {tenant} are filled with psycopg's sql
-- composition (identifiers and literals); %(name)s are bound parameters.

-- name: jobs
-- The queue: infrastructure, no policy. A worker serves every tenant through it.
-- sets_tenant = false marks the path that never sets the tenant (a system job, a job
-- whose failure handler runs before it set its tenant): it still reads and writes.
create table isolation_jobs (
  id bigint primary key,
  tenant_id int not null,
  sets_tenant boolean not null,
  status text not null default 'queued'
);

-- name: notes
-- The tenant-owned table. A row's tenant comes from the session's tenant context, as an
-- application writing "for the current tenant" would; the job never names it.
create table tenant_notes (
  tenant_id int not null default nullif(current_setting('app.tenant_id', true), '')::int,
  job_id bigint not null,
  body text not null
);

-- name: enable_rls
alter table tenant_notes enable row level security;

-- name: force_rls
-- The policy would not bind the table's owner otherwise; the jobs run as another role,
-- but a harness that one day runs them as the owner should not silently see everything.
alter table tenant_notes force row level security;

-- name: policy
-- Default deny: with no tenant set, current_setting(..., true) is NULL (never set in this
-- session) or '' (set by SET LOCAL in an earlier transaction, reset at its end); both
-- compare as NULL, so no row is visible and no row can be written.
create policy tenant_isolation on tenant_notes
  using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::int)
  with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::int);

-- name: create_role
-- Roles are cluster-wide: the name carries the run's token (harness_app_<token>), and
-- creating it fails if one of that name exists, so the harness only ever drops a role
-- it created.
create role {role} login password {password} nosuperuser nobypassrls nocreatedb nocreaterole;

-- name: comment_role
-- The harness's mark with the run's token, as on its schemas: with the name, how a later
-- run knows a role that a run killed outright left behind.
comment on role {role} is {mark};

-- name: leftover_roles
-- Roles named as this experiment names them, with their comments; which of them are
-- leftovers (marked with the token of their name, their run gone) is decided in Python.
select r.rolname, shobj_description(r.oid, 'pg_authid')
from pg_roles r
where r.rolname ~ '^harness_app_[0-9a-f]+$';

-- name: leftover_schemas
-- Schemas named as this experiment names them; drop_leftover decides which are leftovers.
select nspname from pg_namespace where nspname ~ '^harness_isolation_[0-9a-f]+$';

-- name: role_search_path
-- Set on the role rather than in the connection string: PgBouncer refuses `options`.
alter role {role} set search_path = {schema};

-- name: grant_schema
grant usage on schema {schema} to {role};

-- name: grant_jobs
grant select, update on isolation_jobs to {role};

-- name: grant_notes
grant select, insert on tenant_notes to {role};

-- name: drop_owned
-- Revokes what was granted to the role in this database (its schema may be gone already).
drop owned by {role};

-- name: drop_role
drop role {role};

-- name: drop_tables
drop table if exists isolation_jobs, tenant_notes;

-- name: enqueue
insert into isolation_jobs (id, tenant_id, sets_tenant)
select * from unnest(%(ids)s::bigint[], %(tenant_ids)s::int[], %(sets_tenant)s::bool[]);

-- name: claim
-- The article's claim pattern, in the transaction that does the job's work.
select id, tenant_id, sets_tenant
from isolation_jobs
where status = 'queued'
order by id
limit 1
for update skip locked;

-- name: set_session
-- SET: the tenant stays on the connection after the transaction commits, for whichever
-- job (or PgBouncer client) uses that connection next.
set app.tenant_id = {tenant};

-- name: set_local
-- SET LOCAL: the tenant ends with the job's transaction.
set local app.tenant_id = {tenant};

-- name: read_notes
-- What the job sees: the tenant it runs as, and the rows of other tenants visible to it.
select
  nullif(current_setting('app.tenant_id', true), '')::int as running_as,
  count(*) filter (where tenant_id <> %(tenant_id)s) as other_rows,
  count(*) as rows
from tenant_notes;

-- name: write_note
-- The row gets the tenant of the session's context; RLS refuses it when there is none.
insert into tenant_notes (job_id, body)
values (%(job_id)s, %(body)s)
returning tenant_id;

-- name: finish
update isolation_jobs set status = 'done' where id = %(job_id)s;
