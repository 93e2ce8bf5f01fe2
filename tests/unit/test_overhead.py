"""harness overhead without a server: the pgbench script from the blocks, its output read,
the medians and the goals."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.experiments.overhead import (
    Load,
    Measurement,
    OverheadSettings,
    goals,
    parse_pgbench,
    pgbench_env,
    pgbench_script,
    pgpass_line,
    schedule,
    summarise,
    to_pgbench,
)
from harness.queues.sql.strategies import load_strategies

FIFO_20_MS = """\
begin;
select id, tenant_id
from jobs
where status = 'queued'
order by id
limit 1
for update skip locked \\gset
\\set job_id :id
update jobs
set status = 'running', started_at = clock_timestamp()
where id = :job_id and status = 'queued';
commit;
\\sleep 20 ms
update jobs
set status = 'done', finished_at = clock_timestamp()
where id = :job_id and status = 'running';
"""

# What pgbench 17 printed for that script with -r (from a real run).
PGBENCH_OUTPUT = """\
pgbench (17.10)
transaction type: -
query mode: prepared
number of clients: 4
number of threads: 4
number of transactions per client: 500
number of transactions actually processed: 2000/2000
number of failed transactions: 0 (0.000%)
latency average = 1.826 ms
tps = 2190.299819 (without initial connection time)
statement latencies in milliseconds and failures:
         0.109           0  begin;
         0.136           0  select id, tenant_id
         0.006           0  \\set job_id :id
         0.195           0  update jobs
         0.668           0  commit;
         0.690           0  update jobs
"""


def test_fifo_script_is_the_workers_blocks_in_pgbench_syntax() -> None:
    script = pgbench_script(load_strategies()["fifo"], 20)
    assert script.text == FIFO_20_MS
    assert script.claim_commands == 5  # begin, dequeue, \set, start, commit


def test_every_strategy_converts_all_placeholders_and_sets_the_dequeued_row() -> None:
    for name, strategy in load_strategies().items():
        text = pgbench_script(strategy, 0).text
        assert "%(" not in text, name
        assert text.count(r"\gset") == 1, name
        assert r"\sleep" not in text, name  # 0 ms jobs: no sleep at all, as time.sleep(0)
        assert to_pgbench(strategy.sql("dequeue"), gset=True) in text, name


def test_served_and_retire_come_between_dequeue_and_commit() -> None:
    script = pgbench_script(load_strategies()["round_robin_active"], 5)
    commands = script.text.index
    assert commands(r"\gset") < commands("queued = queued - 1") < commands("delete from")
    assert commands("delete from") < commands("commit;") < commands(r"\sleep 5 ms")
    assert script.claim_commands == 7


def test_hold_strategies_complete_inside_the_claim_transaction() -> None:
    script = pgbench_script(load_strategies()["fifo_hold"], 20)
    lines = script.text.splitlines()
    assert lines[0] == "begin;" and lines[-1] == "commit;"
    assert script.text.index(r"\sleep 20 ms") < script.text.index("status = 'done'")
    assert script.claim_commands == 4  # the claim ends where the work begins


def test_pgbench_output_gives_counts_and_per_command_latencies() -> None:
    output = parse_pgbench(PGBENCH_OUTPUT)
    assert (output.processed, output.failed) == (2000, 0)
    assert output.latencies_ms == [0.109, 0.136, 0.006, 0.195, 0.668, 0.690]


def test_the_password_goes_to_a_file_and_the_schema_to_pgoptions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never PGPASSWORD, which any process of pgbench's user reads in /proc: the password
    is in a 0600 file that PGPASSFILE names; nothing else of the caller's goes along."""
    monkeypatch.setenv("PGPASSWORD", "callers")
    monkeypatch.setenv("TQB_TEST_CANARY", "callers")
    dsn = "host=/tmp/x port=5433 user=u dbname=bench password=pw"
    env = pgbench_env(dsn, "harness_o", Path("/run/pgpass"))
    assert (env["PGHOST"], env["PGPORT"], env["PGDATABASE"]) == ("/tmp/x", "5433", "bench")
    assert "PGPASSWORD" not in env and "TQB_TEST_CANARY" not in env
    assert env["PGPASSFILE"] == "/run/pgpass"
    assert env["PGOPTIONS"] == "-c search_path=harness_o"


def test_a_password_file_line_escapes_what_libpq_reads_as_separators() -> None:
    assert pgpass_line("a:b\\c") == "*:*:*:*:a\\:b\\\\c\n"


def test_jobs_are_rounded_up_to_whole_transactions_per_client() -> None:
    settings = OverheadSettings(clients=3, jobs=10, work_jobs=9, work_ms=7)
    assert settings.loads() == [Load(0, 12), Load(7, 9)]


def test_rounds_alternate_which_arm_goes_first() -> None:
    firsts = [arm for _, _, arm in schedule(OverheadSettings(rounds=2))][::2]
    assert firsts == ["pgbench", "pgbench", "harness", "harness"]


def measurement(arm: str, work_ms: int, round_: int, makespan_s: float) -> Measurement:
    return Measurement(arm, work_ms, round_, 100, makespan_s, 1.0)  # type: ignore[arg-type]


def test_medians_ratios_and_goals() -> None:
    settings = OverheadSettings(jobs=100, work_jobs=100, clients=4, rounds=3)
    measured = [
        *(measurement("pgbench", 0, r, s) for r, s in enumerate([1.0, 1.2, 5.0], 1)),
        *(measurement("harness", 0, r, s) for r, s in enumerate([1.45, 1.4, 1.35], 1)),
        *(measurement("pgbench", 20, r, 10.0) for r in (1, 2, 3)),
        *(measurement("harness", 20, r, 10.2) for r in (1, 2, 3)),
    ]
    instant, work = summarise(measured, settings)
    assert instant.pgbench.makespan_s.median == 1.2  # the outlier does not count
    assert instant.ratio("makespan_s") == pytest.approx(1.4 / 1.2)
    throughput, makespan = goals([instant, work])
    assert throughput.measured == pytest.approx(1.2 / 1.4)
    assert throughput.met and throughput.message.startswith("goal met")
    assert makespan.measured == pytest.approx(1.02) and makespan.met
    slower = [
        m if m.arm == "pgbench" else measurement(m.arm, m.work_ms, m.round, m.makespan_s * 2)
        for m in measured
    ]
    missed = goals(summarise(slower, settings))
    assert not any(goal.met for goal in missed)
    assert all(goal.message.startswith("GOAL MISSED") for goal in missed)


def test_ratios_are_taken_within_each_round_then_the_median() -> None:
    """Round 3 ran while the machine was busy for pgbench's arm only: it does not count."""
    settings = OverheadSettings(jobs=100, work_jobs=100, clients=4, rounds=3)
    makespans = {"pgbench": [1.0, 2.0, 4.0], "harness": [1.05, 2.1, 2.0]}
    measured = [
        measurement(arm, work_ms, r, s)
        for arm, values in makespans.items()
        for work_ms in (0, 20)
        for r, s in enumerate(values, 1)
    ]
    instant, _ = summarise(measured, settings)
    assert instant.ratio("makespan_s") == pytest.approx(1.05)  # medians alone: 2.0 / 2.0
