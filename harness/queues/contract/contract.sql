-- What the harness reads of any queue library's objects, whatever the library.

-- name: analyze_tables
-- Statistics on every table of the run's schema (or of a schema a library keeps its
-- tables in by a fixed name) after a backlog load, as after the SQL strategies' load
-- (and as autovacuum would gather them in time).
select format('analyze %%I.%%I', schemaname, tablename)
  from pg_tables
 where schemaname = coalesce(%(schema)s, current_schema())
