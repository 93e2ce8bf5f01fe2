-- A worker fleet: members on other hosts join one run through tables of their own, in a
-- schema of the run's (harness/run/fleet.py). Every timestamp is the server's
-- clock_timestamp(): the hosts need no clock agreement.

-- name: run_table
-- The run the members join: one row. `go` and `stop` name the last repetition whose
-- clock started and whose workers must stop; the coordinator's heartbeat says it lives.
create table fleet_run (
  run_id text primary key,
  harness_version text not null,
  protocol int not null,
  expected int not null,
  state text not null default 'waiting' check (state in ('waiting', 'running', 'done', 'failed')),
  error text,
  go int not null default 0,
  stop int not null default 0,
  heartbeat timestamptz not null default clock_timestamp()
);

-- name: members_table
-- One row per member: numbered in the order they joined; its state for `repetition`.
create table fleet_members (
  member int generated always as identity primary key,
  host text not null,
  pid int not null,
  harness_version text not null,
  joined_at timestamptz not null default clock_timestamp(),
  heartbeat timestamptz not null default clock_timestamp(),
  state text not null default 'joined'
    check (state in ('joined', 'ready', 'working', 'reported', 'failed')),
  repetition int not null default 0,
  done bigint not null default 0,
  error text
);

-- name: assignments_table
-- What a member runs in a repetition: its programs (as data: harness/queues/wire.py) and
-- the first process slot they take, so slots are unique across the fleet.
create table fleet_assignments (
  repetition int not null,
  member int not null,
  first_slot int not null,
  programs jsonb not null,
  primary key (repetition, member)
);

-- name: reports_table
-- Each member's reports of a repetition (WorkerReports as data), uploaded at the stop.
create table fleet_reports (
  repetition int not null,
  member int not null,
  reports jsonb not null,
  primary key (repetition, member)
);

-- name: open_run
insert into fleet_run (run_id, harness_version, protocol, expected)
values (%(run_id)s, %(version)s, %(protocol)s, %(expected)s);

-- name: run_state
-- What a member reads of the run; the coordinator's heartbeat age in seconds.
select run_id, harness_version, protocol, expected, state, error, go, stop,
       extract(epoch from clock_timestamp() - heartbeat)
from fleet_run;

-- name: lock_run
-- A member joins under the run row's lock, so two that join at once cannot both take
-- the last place.
select expected from fleet_run for update;

-- name: member_count
select count(*) from fleet_members;

-- name: join
insert into fleet_members (host, pid, harness_version)
values (%(host)s, %(pid)s, %(version)s)
returning member;

-- name: coordinator_beat
update fleet_run set heartbeat = clock_timestamp();

-- name: set_run
update fleet_run set state = %(state)s, error = %(error)s;

-- name: members
-- The coordinator's view: each member, its state, and how long ago it last spoke (s).
select member, host, pid, harness_version, state, repetition, done, error,
       extract(epoch from clock_timestamp() - heartbeat)
from fleet_members
order by member;

-- name: assign
insert into fleet_assignments (repetition, member, first_slot, programs)
values (%(repetition)s, %(member)s, %(first_slot)s, %(programs)s);

-- name: assignment
select first_slot, programs from fleet_assignments
where repetition = %(repetition)s and member = %(member)s;

-- name: member_alive
-- A member's heartbeat, from a thread of its own: it speaks while its crew starts too.
update fleet_members set heartbeat = clock_timestamp() where member = %(member)s;

-- name: member_state
-- A member's state in a repetition, and the jobs its crew has done in it.
update fleet_members
set state = %(state)s, repetition = %(repetition)s, done = %(done)s, error = %(error)s
where member = %(member)s;

-- name: go
update fleet_run set go = %(repetition)s, state = 'running';

-- name: stop
update fleet_run set stop = %(repetition)s;

-- name: upload
insert into fleet_reports (repetition, member, reports)
values (%(repetition)s, %(member)s, %(reports)s);

-- name: reports
select member, reports from fleet_reports where repetition = %(repetition)s order by member;

-- name: done
-- The jobs the members have done in the repetition, as they last said.
select coalesce(sum(done), 0) from fleet_members where repetition = %(repetition)s;
