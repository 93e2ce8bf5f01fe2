-- What the pgqrs adapter runs itself beside pgqrs's own code (pgqrs_adapter.py). pgqrs's
-- migrations put its tables in the run's schema (its Config's schema: each of its
-- sessions sets search_path to it), and these run with that schema as the search_path.

-- name: pgqrs_server_clock
-- pgqrs stamps a message's enqueued_at (the batch's one moment) and its first
-- dequeued_at with its process's clock (chrono's Utc::now(), bound as a parameter); this
-- trigger, installed with its tables, writes the server's clock_timestamp() into both as
-- each row is written, so its moments are the server's, like every adapter's. Its
-- dequeue still compares vt with its own clock, and archived_at is its server's now().
-- The one order it touches: the messages of one batch, which pgqrs stamps with one
-- moment (a tie its ORDER BY enqueued_at breaks arbitrarily), follow their insertion.
create function pgqrs_server_clock() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    new.enqueued_at := clock_timestamp();
  elsif new.dequeued_at is not null and old.dequeued_at is null then
    new.dequeued_at := clock_timestamp();
  end if;
  return new;
end $$;
create trigger pgqrs_server_clock before insert or update of dequeued_at
  on pgqrs_messages for each row execute function pgqrs_server_clock();

-- name: pgqrs_ledger
-- pgqrs keeps every message in pgqrs_messages, archived ones too (archived_at set by the
-- consumer's archive, now() of its statement): enqueued_at of the enqueue, dequeued_at
-- of its first dequeue (the server's clock, pgqrs_server_clock). A message not archived
-- with a consumer_worker_id is held by that consumer (dequeued, or left by a consumer
-- that died: pgqrs's dequeue never takes a message that names a consumer); without one
-- it waits.
select id::text,
       (payload ->> 'n')::bigint,
       (payload ->> 't')::int,
       case
           when archived_at is not null then 'done'
           when consumer_worker_id is not null then 'running'
           else 'waiting'
       end,
       enqueued_at,
       dequeued_at,
       archived_at
  from pgqrs_messages
