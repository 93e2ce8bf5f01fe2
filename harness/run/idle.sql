-- An idle queue's polls (harness/run/idle.py): what its workers run while the queue is
-- empty, counted by pg_stat_statements, and which processes are the server's. Each
-- statement here says `tqb idle probe` so that the count leaves the probe's own out.

-- name: stats_schema
-- Where pg_stat_statements is installed in this database (none: it is not, or the server
-- has not loaded it: then nothing is counted, and the record says why).
select /* tqb idle probe */ n.nspname
from pg_extension e
join pg_namespace n on n.oid = e.extnamespace
where e.extname = 'pg_stat_statements'
  and current_setting('shared_preload_libraries') ~ 'pg_stat_statements';

-- name: search_stats
-- The probe's own session finds the view where the extension is.
select /* tqb idle probe */ set_config('search_path', %(schema)s, false);

-- name: statements
-- Every statement counted in this database, with its calls so far: the probe's own left
-- out. pg_stat_statements counts a call as it ends, in shared memory: no flush lag.
select /* tqb idle probe */ s.queryid, s.query, s.calls
from pg_stat_statements s
join pg_database d on d.oid = s.dbid
where d.datname = current_database()
  and s.query not like '%%tqb idle probe%%';

-- name: server_pids
-- The server's processes that its statistics know (every backend, of every database,
-- and its auxiliary processes), the probe's own backend left out.
select /* tqb idle probe */ pid
from pg_stat_activity
where pid <> pg_backend_pid();
