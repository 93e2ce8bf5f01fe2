-- The conformance kit's look at the server (harness adapter-test, docs/adapters.md).

-- name: objects_outside
-- Every object of the database but the system's, those in the schema given and those in
-- the schemas its manifest declares (awa's `awa`): what an adapter must never create.
-- Compared before the adapter installs, after it ran, and after the run's schema (and
-- the declared ones, with it) is dropped.
select 'schema ' || quote_ident(nspname)
  from pg_namespace
 where nspname <> %(schema)s and nspname <> all(%(declared)s::text[])
   and nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
   and nspname not like 'pg\_temp\_%%' and nspname not like 'pg\_toast\_temp\_%%'
union all
select 'relation ' || format('%%I.%%I', n.nspname, c.relname)
  from pg_class as c
  join pg_namespace as n on n.oid = c.relnamespace
 where n.nspname <> %(schema)s and n.nspname <> all(%(declared)s::text[])
   and n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
   and n.nspname not like 'pg\_temp\_%%' and n.nspname not like 'pg\_toast\_temp\_%%'
union all
select 'type ' || format('%%I.%%I', n.nspname, t.typname)
  from pg_type as t
  join pg_namespace as n on n.oid = t.typnamespace
 where n.nspname <> %(schema)s and n.nspname <> all(%(declared)s::text[])
   and n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
   and n.nspname not like 'pg\_temp\_%%' and n.nspname not like 'pg\_toast\_temp\_%%'
union all
select 'function ' || format('%%I.%%I(%%s)', n.nspname, p.proname, oidvectortypes(p.proargtypes))
  from pg_proc as p
  join pg_namespace as n on n.oid = p.pronamespace
 where n.nspname <> %(schema)s and n.nspname <> all(%(declared)s::text[])
   and n.nspname not in ('pg_catalog', 'information_schema')
union all
select 'event trigger ' || quote_ident(evtname) from pg_event_trigger
union all
select 'extension ' || quote_ident(extname) from pg_extension
union all
select 'role ' || quote_ident(rolname) from pg_roles where rolname not like 'pg\_%%'
union all
select 'publication ' || quote_ident(pubname) from pg_publication
