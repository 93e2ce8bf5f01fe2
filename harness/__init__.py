"""tenant-queue-bench: how fairly a PostgreSQL job queue serves many tenants."""

__version__ = "0.2.0"
