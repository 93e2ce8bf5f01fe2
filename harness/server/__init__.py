"""Where it runs: the PostgreSQL providers (embedded, container, external), the run's own
schema, PgBouncer, and the provenance of server and host."""
