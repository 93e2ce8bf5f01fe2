-- The run's own schema (harness/server/schema.py): what the harness reads before it takes
-- a schema over or drops one, and how it ends its own statements before it cleans up.

-- name: find_schema
-- The schema's comment (the harness's mark), its owner, and whether that is the role
-- this session is: the harness takes over and drops only a schema of its own role.
select
  obj_description(n.oid, 'pg_namespace'),
  pg_get_userbyid(n.nspowner),
  n.nspowner = (select oid from pg_roles where rolname = current_user)
from pg_namespace n
where n.nspname = %(schema)s;

-- name: run_sessions
-- The sessions of a harness run still connected (by their application_name, which
-- carries the run's token; its library workers' end in " worker"): a schema whose run
-- has some is in use, not left behind.
select count(*)
from pg_stat_activity
where application_name in (%(application_name)s, %(application_name)s || ' worker')
  and pid <> pg_backend_pid();

-- name: outside_dependents
-- Objects outside the schema that depend on it or on something in it: what `drop schema
-- ... cascade` would drop with it (a user's view on one of its tables, a foreign key to
-- one, a function of one of its types, an extension created in it). Only objects users
-- made (oid 16384 and up). Rules, triggers, policies and defaults have no schema of their
-- own: theirs is their table's; a view's rule stands for the view, which goes with it. A
-- schema's default privileges (ALTER DEFAULT PRIVILEGES IN SCHEMA, as pgmq's install
-- script grants pg_monitor) are the schema's own and go with it.
with dependents as (
  select distinct d.classid, d.objid
  from pg_depend d
  cross join lateral pg_identify_object(d.refclassid, d.refobjid, 0) as referenced
  where d.refobjid >= 16384
    and d.deptype in ('n', 'a')
    and (
      referenced.schema = %(schema)s
      or d.refclassid = 'pg_namespace'::regclass
        and d.refobjid = (select oid from pg_namespace where nspname = %(schema)s)
    )
),
placed as (
  select
    dep.classid,
    dep.objid,
    coalesce(r.ev_class, t.tgrelid, p.polrelid, a.adrelid) as relid,
    coalesce(r.rulename = '_RETURN', false) as view_rule,
    da.defaclnamespace
  from dependents dep
  left join pg_rewrite r on dep.classid = 'pg_rewrite'::regclass and r.oid = dep.objid
  left join pg_trigger t on dep.classid = 'pg_trigger'::regclass and t.oid = dep.objid
  left join pg_policy p on dep.classid = 'pg_policy'::regclass and p.oid = dep.objid
  left join pg_attrdef a on dep.classid = 'pg_attrdef'::regclass and a.oid = dep.objid
  left join pg_default_acl da on dep.classid = 'pg_default_acl'::regclass and da.oid = dep.objid
),
named as (
  select
    case when pl.view_rule then 'pg_class'::regclass else pl.classid end as classid,
    case when pl.view_rule then pl.relid else pl.objid end as objid,
    coalesce(rel.relnamespace, pl.defaclnamespace) as relnamespace
  from placed pl
  left join pg_class rel on rel.oid = pl.relid
)
select distinct object.type || ' ' || object.identity
from named n
cross join lateral pg_identify_object(n.classid, n.objid, 0) as object
where coalesce(object.schema, (select nspname from pg_namespace where oid = n.relnamespace))
  is distinct from %(schema)s
order by 1;

-- name: foreign_owned
-- Objects in the schema that another role than this session's owns: `drop schema ...
-- cascade` would drop them too, and the harness drops only what its own role made. Every
-- catalog whose objects have a schema and an owner; an index, a constraint, a trigger or
-- a table's row type is its table's (a composite type's row type is named as its class).
with owned (kind, name, owner, namespace) as (
  select
    case relkind
      when 'S' then 'sequence' when 'v' then 'view' when 'm' then 'materialized view'
      when 'f' then 'foreign table' when 'c' then 'type' else 'table'
    end,
    relname, relowner, relnamespace
  from pg_class where relkind not in ('i', 'I', 't')
  union all select 'function', proname, proowner, pronamespace from pg_proc
  union all
  select 'type', typname, typowner, typnamespace from pg_type
  where typrelid = 0 and typelem = 0
  union all select 'operator', oprname, oprowner, oprnamespace from pg_operator
  union all select 'operator class', opcname, opcowner, opcnamespace from pg_opclass
  union all select 'operator family', opfname, opfowner, opfnamespace from pg_opfamily
  union all select 'collation', collname, collowner, collnamespace from pg_collation
  union all select 'conversion', conname, conowner, connamespace from pg_conversion
  union all
  select 'text search configuration', cfgname, cfgowner, cfgnamespace from pg_ts_config
  union all
  select 'text search dictionary', dictname, dictowner, dictnamespace from pg_ts_dict
  union all
  select 'statistics object', stxname, stxowner, stxnamespace from pg_statistic_ext
  union all select 'extension', extname, extowner, extnamespace from pg_extension
)
select format('%%s %%I.%%I of %%I', kind, %(schema)s::text, name, pg_get_userbyid(owner))
from owned
where namespace = (select oid from pg_namespace where nspname = %(schema)s)
  and owner <> (select oid from pg_roles where rolname = current_user)
order by 1;

-- name: cancel_own_statements
-- The statements this run's sessions are still running (by its application_name, and
-- only the sessions of this role): an interrupted backlog load would otherwise run to
-- its end, holding the locks the cleanup's drop waits for. Never another's sessions.
select count(*) filter (where pg_cancel_backend(pid))
from pg_stat_activity
where application_name in (%(application_name)s, %(application_name)s || ' worker')
  and usename = current_user
  and pid <> pg_backend_pid()
  and state = 'active';

-- name: cleanup_lock_timeout
-- How long the cleanup waits for a lock on the schema's objects (in its transaction)
-- before it gives up and says what it left.
select set_config('lock_timeout', %(timeout)s, true);
