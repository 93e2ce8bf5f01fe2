-- The faults the harness injects from its own session (harness/run/faults.py).

-- name: terminate_workers
-- faults.backend_kills: every session of the run's library workers, by the
-- application_name the harness gave them (harness/server/connections.py
-- worker_session_name), terminated as an administrator's pg_terminate_backend, a
-- pooler's or a failover's would: the backend exits, its transaction rolls back, its
-- client's next statement fails. Only sessions of this role in this database (what
-- pg_terminate_backend allows a role that is not a superuser); never the harness's own
-- nor the enqueuers'. How many it terminated.
select count(*) filter (where pg_terminate_backend(pid))
from pg_stat_activity
where application_name = %(application_name)s
  and usename = current_user
  and datname = current_database()
  and pid <> pg_backend_pid();

-- name: connection_room
-- faults.connection_exhaustion: the server's max_connections and how many client
-- sessions it has now, this one counted.
select current_setting('max_connections')::int as max_connections,
       (select count(*) from pg_stat_activity where backend_type = 'client backend')::int
         as in_use;

-- name: checkpoint
-- faults.server_crash: before the clock starts, so that the crash's recovery replays
-- the run's own WAL, not the harness's set-up (the schema, a library's migrations) that
-- a server in production would long since have checkpointed. The crash is only ever of
-- a server the harness started, whose superuser it is.
checkpoint;
