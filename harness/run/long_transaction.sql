-- A long transaction beside the queue (harness/run/long_transaction.py): one connection holds a
-- snapshot, another samples what the held horizon does to the queue's tables.

-- name: hold
-- The first statement of a repeatable-read transaction takes its snapshot and keeps it
-- until commit: the backend's xmin (pg_stat_activity.backend_xmin) stays, and no row
-- version deleted or updated after it may be pruned or vacuumed anywhere in the database.
-- It reads no table, so it takes no lock that the queue or the next repetition's DDL
-- would wait for.
select clock_timestamp();

-- name: sample
-- The holder's xmin age (null when it holds nothing), and per table the statistics'
-- live and dead tuple counts, sizes and vacuum counts. The counts are what the backends
-- have flushed: a busy backend flushes its counters at most once a second (PostgreSQL 17,
-- PGSTAT_MIN_INTERVAL), so they lag the table by up to about a second; the sizes do not.
select
  clock_timestamp(),
  (select age(backend_xmin) from pg_stat_activity where pid = %(holder_pid)s),
  j.n_live_tup,
  j.n_dead_tup,
  pg_relation_size(j.relid),
  pg_indexes_size(j.relid),
  j.autovacuum_count,
  j.vacuum_count,
  q.n_live_tup,
  q.n_dead_tup,
  pg_total_relation_size(q.relid),
  q.autovacuum_count
from pg_stat_user_tables j, pg_stat_user_tables q
where j.relid = 'jobs'::regclass and q.relid = 'queue_tenants'::regclass;

-- name: sample_schemas
-- The same for a library's queue (its tables are its own: they are summed): the holder's
-- xmin age, and over every table of the library's schemas (the run's, and those it makes
-- by a fixed name) the live and dead tuple counts, sizes and vacuum counts; nothing for
-- queue_tenants, which is the harness's own, nor for any table named harness_* (an
-- adapter's ledger in the run's schema, such as graphile-worker's finished jobs).
select
  clock_timestamp(),
  (select age(backend_xmin) from pg_stat_activity where pid = %(holder_pid)s),
  sum(t.n_live_tup)::bigint,
  sum(t.n_dead_tup)::bigint,
  sum(pg_relation_size(t.relid))::bigint,
  sum(pg_indexes_size(t.relid))::bigint,
  sum(t.autovacuum_count)::bigint,
  sum(t.vacuum_count)::bigint,
  null::bigint,
  null::bigint,
  null::bigint,
  null::bigint
from pg_stat_user_tables t
where t.schemaname = any(%(schemas)s) and t.relname not like 'harness\_%%';

-- name: vacuum_after
-- Only when the scenario asks (long_transaction.vacuum_after): the cleanup a queue's
-- operator would run by hand, right after the hold ends.
vacuum jobs, queue_tenants;

-- name: use_pgstattuple
-- Held (shared, for the session) by every run that samples with pgstattuple, from before
-- it looks for the extension until its sampling connection closes. A run drops the
-- extension only if it gets this lock alone (drop_pgstattuple_alone): never while another
-- run samples with it. Two-key advisory locks: a space of their own, apart from the
-- one-key locks a strategy may take.
select pg_advisory_lock_shared(hashtext('tenant-queue-bench'), hashtext('pgstattuple'));

-- name: done_with_pgstattuple
-- The sampling connection's shared lock, given up before it closes: a backend ends a
-- moment after its client has closed, and until then it would still hold the lock
-- against the drop that follows (drop_pgstattuple_alone).
select pg_advisory_unlock_shared(hashtext('tenant-queue-bench'), hashtext('pgstattuple'));

-- name: create_pgstattuple_alone
-- Taken in the transaction that looks for the extension and creates it: two runs that
-- start sampling together create it once.
select pg_advisory_xact_lock(hashtext('tenant-queue-bench'), hashtext('pgstattuple create'));

-- name: find_pgstattuple
-- Where the pgstattuple extension is installed, if it is (contrib; the embedded server
-- has it), the comment on that schema (the harness's mark, if a run of it created it
-- there) and whether the schema's owner is the role of this session. Its dead tuple
-- count reads the heap itself, with no statistics lag.
select
  n.nspname,
  obj_description(n.oid, 'pg_namespace'),
  n.nspowner = (select oid from pg_roles where rolname = current_user)
from pg_extension e join pg_namespace n on n.oid = e.extnamespace
where e.extname = 'pgstattuple';

-- name: drop_pgstattuple_alone
-- The lock every sampling run holds shared, taken alone if no run holds it: then no run
-- samples with the extension and it may go. Released by release_pgstattuple.
select pg_try_advisory_lock(hashtext('tenant-queue-bench'), hashtext('pgstattuple'));

-- name: release_pgstattuple
select pg_advisory_unlock(hashtext('tenant-queue-bench'), hashtext('pgstattuple'));

-- name: dead_versions
-- Dead row versions still taking space in each heap (pgstattuple scans the whole table:
-- a few hundred pages here). Unlike n_dead_tup, this counts only versions whose space was
-- not reclaimed: page pruning turns a dead version into a line pointer as soon as the
-- horizon lets it, while n_dead_tup counts it until a vacuum.
select
  (select dead_tuple_count from pgstattuple('jobs')),
  (select dead_tuple_count from pgstattuple('queue_tenants'));

-- name: dead_versions_schemas
-- For a library's queue, over every table of its schemas (pgstattuple reads each whole),
-- but the harness's own (harness_*).
select
  (select sum((pgstattuple(c.oid)).dead_tuple_count)::bigint
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind = 'r' and n.nspname = any(%(schemas)s)
      and c.relname not like 'harness\_%%'),
  null::bigint;

-- name: tables_of_schemas
-- A library's tables (not the harness's own, harness_*), for vacuum_after and a
-- horizon's analytics-like readers.
select n.nspname, c.relname
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where c.relkind in ('r', 'p') and n.nspname = any(%(schemas)s)
   and c.relname not like 'harness\_%%'
 order by 1, 2;

-- name: horizon_sample
-- A horizon's sample of the whole server (docs/long-horizon.md): the oldest xmin any session,
-- prepared transaction or replication slot holds, as an age in transactions (what keeps
-- vacuum from removing dead versions anywhere); the WAL written since the cluster began,
-- in bytes (differences between samples are what the run wrote); the share of the
-- LISTEN/NOTIFY queue in use (0 to 1).
select
  clock_timestamp(),
  greatest(
    (select max(greatest(age(backend_xmin), age(backend_xid))) from pg_stat_activity),
    (select max(age(transaction)) from pg_prepared_xacts),
    (select max(greatest(age(xmin), age(catalog_xmin))) from pg_replication_slots)
  ),
  pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
  pg_notification_queue_usage();

-- name: horizon_relations
-- Each table and index of the queue's own schemas: live and dead tuples (the
-- statistics', up to a second behind), size in bytes, (auto)vacuum and (auto)analyze
-- counts and the seconds since the last of each; an index has its size and scans only.
-- Not the harness's own tables in them (harness_*: an adapter's ledger) nor their
-- indexes: what the harness keeps is not the queue's size.
select
  t.schemaname, t.relname, 'table', null::text,
  t.n_live_tup, t.n_dead_tup, pg_relation_size(t.relid),
  t.vacuum_count, t.autovacuum_count, t.analyze_count, t.autoanalyze_count,
  extract(epoch from clock_timestamp() - t.last_autovacuum)::float8,
  extract(epoch from clock_timestamp() - t.last_autoanalyze)::float8,
  null::bigint
from pg_stat_user_tables t
where t.schemaname = any(%(schemas)s) and t.relname not like 'harness\_%%'
union all
select
  i.schemaname, i.indexrelname, 'index', i.relname,
  null, null, pg_relation_size(i.indexrelid),
  null, null, null, null, null, null,
  i.idx_scan
from pg_stat_user_indexes i
where i.schemaname = any(%(schemas)s) and i.relname not like 'harness\_%%'
order by 1, 3 desc, 2;

-- name: horizon_waits
-- What the database's other active sessions wait on, this second: one row per wait
-- event (CPU where a session waits on none), the sessions counted.
select coalesce(wait_event_type, 'CPU'), coalesce(wait_event, 'CPU'), count(*)
from pg_stat_activity
where datname = current_database() and state = 'active' and pid <> pg_backend_pid()
  and backend_type = 'client backend'
group by 1, 2
order by 1, 2;

-- name: horizon_pgstattuple
-- At each phase boundary, each table of the queue's own schemas read whole by
-- pgstattuple: the share of its bytes in dead versions and free space (not the
-- harness's own, harness_*).
select n.nspname, c.relname, s.table_len, s.dead_tuple_percent, s.free_percent
from pg_class c
join pg_namespace n on n.oid = c.relnamespace
cross join lateral pgstattuple(c.oid) s
where c.relkind = 'r' and n.nspname = any(%(schemas)s) and c.relname not like 'harness\_%%'
order by 1, 2;
