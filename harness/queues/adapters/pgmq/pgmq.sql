-- The calls of pgmq's SQL API the adapter makes, with the arguments its Python client
-- (pgmq 1.1) passes by name. pgmq's own install script puts its functions and tables in
-- the run's schema (pgmq_adapter.py says how), and these run with that schema as the
-- search_path: each is pgmq's function, its SQL unchanged. `create` is a reserved word,
-- so its unqualified call is quoted.

-- name: pgmq_installed_as_extension
-- The pgmq extension created in this database: its install script then takes the
-- extension's branch (pg_extension_config_dump), which fails outside CREATE EXTENSION.
select exists (select 1 from pg_extension where extname = 'pgmq');

-- name: pgmq_create
-- The queue: its table q_<queue>, its archive a_<queue>, and its row in meta.
select "create"(queue_name => %(queue)s);

-- name: pgmq_create_fifo_index
-- The GIN index on the queue's headers that pgmq-py's docs ask for before FIFO reads
-- ("FIFO operations require the queue to have a FIFO index").
select create_fifo_index(queue_name => %(queue)s);

-- name: pgmq_send_batch
-- One batch of messages in one statement; enqueued_at is now() of its transaction.
select * from send_batch(queue_name => %(queue)s, msgs => %(msgs)s::jsonb[]);

-- name: pgmq_send_batch_grouped
-- The same, each message with its FIFO group in the header x-pgmq-group (the tenant).
select * from send_batch(
  queue_name => %(queue)s, msgs => %(msgs)s::jsonb[], headers => %(headers)s::jsonb[]
);

-- name: pgmq_read
-- Up to qty visible messages in msg_id order, each hidden for vt seconds.
select msg_id, message from read(queue_name => %(queue)s, vt => %(vt)s, qty => %(qty)s);

-- name: pgmq_read_with_poll
-- read, polled in the server every poll_interval_ms until a message is visible or
-- max_poll_seconds have passed.
select msg_id, message
from read_with_poll(
  queue_name => %(queue)s, vt => %(vt)s, qty => %(qty)s,
  max_poll_seconds => %(max_poll_seconds)s, poll_interval_ms => %(poll_interval_ms)s
);

-- name: pgmq_read_grouped_rr
-- Layered round-robin across FIFO groups: the first visible message of every group whose
-- oldest message is visible, groups in the order of their oldest message, then the
-- second of each, up to qty.
select msg_id, message
from read_grouped_rr(queue_name => %(queue)s, vt => %(vt)s, qty => %(qty)s);

-- name: pgmq_read_grouped_rr_with_poll
select msg_id, message
from read_grouped_rr_with_poll(
  queue_name => %(queue)s, vt => %(vt)s, qty => %(qty)s,
  max_poll_seconds => %(max_poll_seconds)s, poll_interval_ms => %(poll_interval_ms)s
);

-- name: pgmq_read_grouped_head
-- The oldest message of up to qty groups, if it is visible: one message per group.
select msg_id, message
from read_grouped_head(queue_name => %(queue)s, vt => %(vt)s, qty => %(qty)s);

-- name: pgmq_read_grouped_head_with_poll
select msg_id, message
from read_grouped_head_with_poll(
  queue_name => %(queue)s, vt => %(vt)s, qty => %(qty)s,
  max_poll_seconds => %(max_poll_seconds)s, poll_interval_ms => %(poll_interval_ms)s
);

-- name: pgmq_archive
-- A message done: moved from the queue to its archive, archived_at = now().
select archive(queue_name => %(queue)s, msg_id => %(msg_id)s::bigint);

-- name: pgmq_archive_batch
-- A batch of messages done, in one statement.
select * from archive(queue_name => %(queue)s, msg_ids => %(msg_ids)s::bigint[]);

-- name: pgmq_ledger
-- pgmq keeps a message in its queue table q_harness until it is archived into a_harness
-- (the worker archives each one when its task is done, as pgmq-py's docs show):
-- enqueued_at is now() of the send, last_read_at clock_timestamp() of the read that
-- handed it out (the last read: a message read twice is two task runs), archived_at
-- now() of the archive. A message still in the queue is unfinished.
select msg_id::text, (message ->> 'n')::bigint, (message ->> 't')::int, 'done',
       enqueued_at, last_read_at, archived_at
  from a_harness
union all
select msg_id::text, (message ->> 'n')::bigint, (message ->> 't')::int, 'waiting',
       enqueued_at, last_read_at, null::timestamptz
  from q_harness
