"""Scenario problems known before any server starts: refused by the loader, `harness
validate` and `harness run` alike, each as one line naming the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import HarnessError
from harness.queues.sql.strategies import load_strategies
from harness.scenario.loader import load_scenario
from harness.scenario.model import MAX_BACKLOG_JOBS, MAX_TENANTS, Backlog
from harness.scenario.parse import MAX_BYTES, MAX_DEPTH
from harness.scenario.traits import ANY, QueueTraits
from tests.conftest import SCENARIOS, SHORT_NOISY, builtin_traits, harness_cli

BASE = """\
name: holes
workers: 2
strategies: [fifo]
tenant_groups:
  - name: a
    tenants: 1
    jobs_per_tenant: 10
    duration_ms: 5
"""


def refusal(path: Path, queues: dict[str, QueueTraits] | None = None) -> str:
    """The loader's one line for the file, without its path."""
    with pytest.raises(HarnessError) as caught:
        load_scenario(path, queues if queues is not None else builtin_traits())
    message = str(caught.value)
    assert "\n" not in message
    assert caught.value.exit_code == 2
    assert message.startswith(f"{path}:")
    return message.removeprefix(f"{path}:")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_document_nested_past_the_limit_is_one_line_not_a_recursion_error(write_yaml) -> None:
    path = write_yaml(BASE + f"description: {nested(5000)}\n")
    assert refusal(path) == (
        f"9: nested deeper than {MAX_DEPTH} levels of mappings and lists; "
        "a scenario needs 6 at most"
    )


def test_nesting_at_the_limit_is_parsed_and_judged_as_a_field(write_yaml) -> None:
    # The top mapping is one level, the list's own levels and the scalar inside the rest.
    path = write_yaml(BASE + f"description: {nested(MAX_DEPTH - 1)}\n")
    assert refusal(path) == "9: description: Input should be a valid string"


def test_block_nesting_past_the_limit_names_the_line_where_it_passes(write_yaml) -> None:
    deep = "".join(f"{'  ' * level}k{level}:\n" for level in range(MAX_DEPTH + 10))
    path = write_yaml(BASE + "description:\n" + "\n".join("  " + ln for ln in deep.splitlines()))
    assert refusal(path).startswith(f"{9 + MAX_DEPTH - 1}: nested deeper than {MAX_DEPTH}")


def test_a_file_past_the_size_limit_is_refused_without_parsing_it(write_yaml) -> None:
    filler = "# a comment line that pads the file out\n" * (MAX_BYTES // 40 + 10)
    assert refusal(write_yaml(BASE + filler)).endswith(
        f": the file is over {MAX_BYTES:,} bytes (256 KiB); a scenario is a few kB"
    )


def test_a_top_level_key_written_twice_names_both_lines(write_yaml) -> None:
    path = write_yaml(BASE + "workers: 4\n")
    assert refusal(path) == (
        "9: workers: written twice in one mapping (on lines 2 and 9); YAML would keep only "
        "the last: give each key once"
    )


def test_a_nested_key_written_twice_names_its_field(write_yaml) -> None:
    path = write_yaml(BASE + "    tenants: 3\n")
    assert refusal(path).startswith(
        "9: tenant_groups[0].tenants: written twice in one mapping (on lines 6 and 9)"
    )


def test_a_flow_mapping_with_a_key_twice_is_refused(write_yaml) -> None:
    path = write_yaml(BASE + "explain: {repeat: 1, repeat: 2}\n")
    assert refusal(path).startswith("9: explain.repeat: written twice in one mapping (on line 9)")


def test_a_merge_key_is_not_a_key_written_twice(write_yaml) -> None:
    text = BASE.replace("  - name: a\n", "  - &a {name: a, tenants: 1, jobs_per_tenant: 10}\n")
    text = text.replace("    tenants: 1\n    jobs_per_tenant: 10\n    duration_ms: 5\n", "")
    text += "  - {<<: *a, name: b, duration_ms: 5}\n"
    path = write_yaml(text.replace("jobs_per_tenant: 10}", "jobs_per_tenant: 10, duration_ms: 1}"))
    assert [g.name for g in load_scenario(path, builtin_traits()).scenario.tenant_groups] == [
        "a",
        "b",
    ]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("tenants: 1", "tenants: true", "6: tenant_groups[0].tenants: Input should be a valid "
         "integer (got True)"),
        ("tenants: 1", 'tenants: "3"', "6: tenant_groups[0].tenants: Input should be a valid "
         "integer (got '3')"),
        ("duration_ms: 5", 'duration_ms: "5"', "8: tenant_groups[0].duration_ms: Input should "
         "be a valid number (got '5')"),
        ("duration_ms: 5", "duration_ms: false", "8: tenant_groups[0].duration_ms: Input "
         "should be a valid number (got False)"),
        ("workers: 2", "workers: yes", "2: workers[0]: Input should be a valid integer "
         "(got True)"),
        ("name: holes", "name: holes\ntimeout_s: '60'", "2: timeout_s: Input should be a valid "
         "number (got '60')"),
    ],
)  # fmt: skip
def test_booleans_and_strings_are_not_numbers(
    write_yaml, old: str, new: str, expected: str
) -> None:
    assert refusal(write_yaml(BASE.replace(old, new, 1))) == expected


@pytest.mark.parametrize("duration", ["20", "20.0"])
def test_an_integer_or_a_float_is_a_number(write_yaml, duration: str) -> None:
    scenario = load_scenario(
        write_yaml(BASE.replace("duration_ms: 5", f"duration_ms: {duration}")), builtin_traits()
    ).scenario
    assert scenario.tenant_groups[0].duration_ms == 20.0


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            "    enqueue_at_s: 1000\n",
            "9: tenant_groups[0].enqueue_at_s: its last jobs arrive at 1000 s, not before "
            "timeout_s (300 s); arrivals must end before it: raise timeout_s or arrive earlier",
        ),
        (
            "    repeat: 11\n    every_s: 30\n",
            "10: tenant_groups[0].every_s: its last jobs arrive at 300 s, not before timeout_s",
        ),
        (
            "    enqueue_at_s: 100\n    repeat: 3\n    every_s: 100\n",
            "11: tenant_groups[0].every_s: its last jobs arrive at 300 s",
        ),
    ],
)
def test_a_burst_arriving_at_or_after_the_timeout_is_refused(
    write_yaml, fields: str, expected: str
) -> None:
    assert refusal(write_yaml(BASE + fields)).startswith(expected)


def test_a_poisson_window_ending_at_the_timeout_is_refused(write_yaml) -> None:
    text = BASE.replace("jobs_per_tenant: 10", "arrival: poisson\n    rate_per_s: 10")
    text += "    enqueue_at_s: 50\n    window_s: 250\n"
    assert refusal(write_yaml(text)).startswith(
        "11: tenant_groups[0].window_s: its last jobs arrive at 300 s, not before timeout_s"
    )


def test_arrivals_just_before_the_timeout_are_accepted(write_yaml) -> None:
    path = write_yaml(BASE + "    enqueue_at_s: 100\n    repeat: 3\n    every_s: 99.5\n")
    assert load_scenario(path, builtin_traits()).scenario.tenant_groups[0].last_arrival_s == 299


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("faults:\n  crashes: [{worker: 0, at_s: 300}]\n", "10: faults.crashes[0]: at_s 300"),
        ("faults:\n  server_restart: {at_s: 300}\n", "10: faults.server_restart: at_s 300 is"),
        ("long_transaction: {from_s: 100, for_s: 200}\n", "9: long_transaction.for_s: the hold"),
    ],
)
def test_fault_times_and_the_long_transaction_are_inside_the_timeout(
    write_yaml, extra: str, expected: str
) -> None:
    assert refusal(write_yaml(BASE + extra)).startswith(expected)


INCAPABLE = ["capped", "round_robin_active", "fifo_hold", "round_robin_hold"]


@pytest.mark.parametrize("strategy", INCAPABLE)
def test_faults_with_a_strategy_that_cannot_take_them_are_refused_on_its_line(
    write_yaml, strategy: str
) -> None:
    text = BASE.replace("strategies: [fifo]", f"strategies:\n  - fifo\n  - {strategy}")
    text += "tenant_cap: 2\nfaults:\n  crashes: [{worker: 0, at_s: 1}]\n"
    assert refusal(write_yaml(text)) == (
        f"5: strategies[1]: cannot take faults: {load_strategies()[strategy].traits.faults}"
    )


def test_failing_jobs_are_a_fault_a_strategy_may_not_take(write_yaml) -> None:
    text = BASE.replace("[fifo]", "[capped]").replace("    duration_ms: 5\n", "")
    text += "    duration_ms: 5\n    failure_probability: 0.1\ntenant_cap: 1\n"
    assert refusal(write_yaml(text)).startswith(
        "3: strategies[0]: cannot take failing jobs (failure_probability): strategy 'capped' keeps"
    )


def test_a_library_queue_is_refused_what_its_traits_refuse(write_yaml) -> None:
    extra = "faults:\n  crashes: [{worker: 0, at_s: 1}]\n"
    text = BASE.replace("strategies: [fifo]", "strategies: [fifo, procrastinate]") + extra
    reason = builtin_traits()["procrastinate"].faults
    assert refusal(write_yaml(text)) == f"3: strategies[1]: cannot take faults: {reason}"


def test_a_library_queue_takes_a_long_transaction(write_yaml) -> None:
    """A held snapshot beside a library's queue: its own tables sampled (the runner's)."""
    extra = "long_transaction: {from_s: 1, for_s: 2}\n"
    text = BASE.replace("strategies: [fifo]", "strategies: [fifo, procrastinate]") + extra
    assert builtin_traits()["procrastinate"].long_transaction is None
    assert load_scenario(write_yaml(text), builtin_traits()).scenario.long_transaction


def test_a_queue_that_cannot_explain_is_refused_on_the_explain_strategies_line(
    write_yaml,
) -> None:
    text = (
        "name: plans\nstrategies: [fifo, other]\nbacklog:\n  groups:\n"
        "    - {name: a, tenants: 1, jobs_per_tenant: 1}\n"
        "explain:\n  strategies: [fifo, other]\n"
    )
    queues = {"fifo": ANY, "other": QueueTraits(explain="its dequeue is not one statement")}
    assert refusal(write_yaml(text), queues) == (
        "7: explain.strategies[1]: cannot take explain captures: its dequeue is not one statement"
    )


def test_the_strategies_that_cannot_take_faults_are_the_ones_the_runner_refuses() -> None:
    refusing = {name for name, s in load_strategies().items() if s.traits.faults is not None}
    assert refusing == set(INCAPABLE)


def test_a_recursive_alias_is_judged_not_walked_forever(write_yaml) -> None:
    assert refusal(write_yaml(BASE + "description: &loop [*loop]\n")) == (
        "9: description: Input should be a valid string"
    )


BROKEN = {
    "deep": BASE + f"description: {nested(3000)}\n",
    "twice": BASE + "workers: 4\n",
    "boolean": BASE.replace("tenants: 1", "tenants: true"),
    "late": BASE + "    enqueue_at_s: 1000\n",
    "capped": BASE.replace("[fifo]", "[fifo, capped]")
    + "tenant_cap: 1\nfaults:\n  crashes: [{worker: 0, at_s: 1}]\n",
    "variant": BASE + "backlog:\n  groups: [{name: b, tenants: 1, jobs_per_tenant: 10000000}]\n"
    "explain:\n  variants: [{name: v, tenants: {b: 1000000}}]\n",
    "idle": BASE
    + "backlog:\n  groups:\n"
    + "".join(f"    - {{name: i{k}, tenants: 60000, jobs_per_tenant: 0}}\n" for k in range(2)),
}


@pytest.mark.parametrize("command", ["validate", "run"])
def test_every_broken_shape_stops_the_command_before_anything_runs(
    tmp_path: Path, command: str
) -> None:
    """One invocation per shape, each behind a good scenario: exit 2, one line naming the
    broken file, no server started, no results folder. The first shape through `python -m
    harness` as a user runs it; the others through the same typer app in this process
    (the same lines and exit codes, without an interpreter and its imports each: they
    took this test from 28 s of CPU to 2 on this machine)."""
    good = tmp_path / "good.yaml"
    good.write_text(SHORT_NOISY)
    for index, (shape, text) in enumerate(BROKEN.items()):
        bad = tmp_path / f"{shape}.yaml"
        bad.write_text(text)
        results = ["--results-dir", str(tmp_path / "results")] if command == "run" else []
        args = (command, str(good), str(bad), *results)
        code, stdout, stderr = _harness(*args) if index else _harness_process(*args)
        assert code == 2, (shape, stderr)
        assert stderr.startswith(f"error: {bad}:"), (shape, stderr)
        assert stderr.strip().count("\n") == 0, (shape, stderr)
        assert "Starting PostgreSQL" not in stdout, shape
        assert not (tmp_path / "results").exists(), shape


def _harness_process(*args: str) -> tuple[int, str, str]:
    done = harness_cli(*args)
    return done.returncode, done.stdout, done.stderr


def _harness(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(app, list(args))
    return done.exit_code, done.stdout, done.stderr


def test_a_server_restart_on_dsn_is_refused_before_any_server(
    tmp_path: Path,
) -> None:
    """The provider is known before anything starts: no earlier scenario runs first."""
    restart = SCENARIOS / "server-restart.yaml"
    done = harness_cli(
        "run",
        str(SCENARIOS / "noisy-neighbour.yaml"),
        str(restart),
        "--pg",
        "external",
        "--dsn",
        "host=/nonexistent port=1",
        "--results-dir",
        str(tmp_path / "results"),
    )
    assert done.returncode == 2, done.stderr
    line = next(
        number
        for number, text in enumerate(restart.read_text().splitlines(), 1)
        if text.strip().startswith("server_restart")
    )
    assert done.stderr.strip() == (
        f"error: {restart}:{line}: faults.server_restart: restarts the server, which only a "
        "server the harness starts can take (--pg embedded or container); this run uses --dsn"
    )
    assert "Starting PostgreSQL" not in done.stdout
    assert not (tmp_path / "results").exists()


PLANS = """\
name: plans
strategies: [fifo]
backlog:
  groups:
    - {name: large, tenants: 1, jobs_per_tenant: 10000000}
    - {name: idle, tenants: 10, jobs_per_tenant: 0}
explain:
  variants:
    - name: backlog
    - name: huge
      tenants: {large: 1000000}
"""


def test_a_variant_of_ten_trillion_jobs_is_refused_by_validate_naming_its_field(
    tmp_path: Path,
) -> None:
    """The issue's variant: a million tenants of ten million jobs each (10^13 jobs)."""
    path = tmp_path / "plans.yaml"
    path.write_text(PLANS)
    done = harness_cli("validate", str(path))
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: {path}:11: explain.variants[1].tenants.large: Input should be less than or "
        f"equal to {MAX_TENANTS} (got 1000000)\n"
    )


def test_a_variants_jobs_are_checked_like_the_backlogs_own(tmp_path: Path) -> None:
    """A variant's counts replace the backlog's: its total is held to the backlog's cap,
    not passed on to an INSERT of 10^12 jobs."""
    path = tmp_path / "plans.yaml"
    path.write_text(
        PLANS.replace("tenants: 1, jobs", "tenants: 0, jobs").replace("1000000}", "100000}")
    )
    done = harness_cli("validate", str(path))
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: {path}:11: explain.variants[1].tenants: 1,000,000,000,000 backlog jobs in "
        "variant 'huge'; at most 10,000,000\n"
    )


def test_a_variant_within_the_job_cap_but_past_the_tenant_cap_is_refused(write_yaml) -> None:
    text = PLANS.replace("{large: 1000000}", "{idle: 100000}")
    assert refusal(write_yaml(text)) == (
        "11: explain.variants[1].tenants: 100,001 tenants in variant 'huge' (its backlog and "
        f"the tenant groups); at most {MAX_TENANTS:,} in all"
    )


def test_a_variant_that_grows_a_queue_is_held_to_the_backlog_cap_and_its_groups(
    write_yaml,
) -> None:
    """jobs_per_tenant replaces a group's queue like tenants its size: its total is held to
    the backlog's cap, and it names backlog groups only."""
    grown = PLANS.replace("tenants: {large: 1000000}", "jobs_per_tenant: {idle: 1000000}")
    assert refusal(write_yaml(grown)) == (
        "11: explain.variants[1].jobs_per_tenant: 20,000,000 backlog jobs in variant 'huge'; "
        "at most 10,000,000"
    )
    unknown = PLANS.replace("tenants: {large: 1000000}", "jobs_per_tenant: {bulk: 5}")
    assert "['bulk'] are not backlog groups" in refusal(write_yaml(unknown))


def test_a_variant_built_by_the_run_is_validated_again() -> None:
    """Whoever builds a variant's backlog gets a checked one: model_copy checks nothing."""
    backlog = Backlog.model_validate(
        {"groups": [{"name": "large", "tenants": 1, "jobs_per_tenant": MAX_BACKLOG_JOBS}]}
    )
    with pytest.raises(ValidationError, match="backlog jobs; at most 10,000,000"):
        backlog.reshaped({"large": 2}, {})


def test_groups_of_a_million_idle_tenants_are_refused_at_the_group_past_the_cap(
    write_yaml,
) -> None:
    idle = "".join(
        f"    - {{name: idle{k}, tenants: 50000, jobs_per_tenant: 0}}\n" for k in range(3)
    )
    text = f"name: idle\nstrategies: [fifo]\nbacklog:\n  groups:\n{idle}explain: {{}}\n"
    assert refusal(write_yaml(text)) == (
        "7: backlog.groups[2].tenants: 50,000 tenants bring the scenario to 150,000 (backlog "
        f"and tenant groups); at most {MAX_TENANTS:,} in all"
    )


def test_one_group_of_a_million_idle_tenants_is_past_its_fields_bound(write_yaml) -> None:
    text = PLANS.replace("tenants: 10, jobs_per_tenant: 0", "tenants: 1000000, jobs_per_tenant: 0")
    assert refusal(write_yaml(text)) == (
        f"6: backlog.groups[1].tenants: Input should be less than or equal to {MAX_TENANTS} "
        "(got 1000000)"
    )


def test_the_tenants_of_the_shipped_scenarios_are_within_the_cap_with_room() -> None:
    most = 0
    for path in SCENARIOS.glob("*.yaml"):
        if "suite" in yaml.safe_load(path.read_text()):
            continue  # its cases are shipped scenarios of their own
        scenario = load_scenario(path, builtin_traits()).scenario
        timed = sum(group.tenants for group in scenario.tenant_groups)
        backlogs = [scenario.backlog] if scenario.backlog else []
        if scenario.explain is not None and scenario.backlog is not None:
            backlogs += [scenario.variant_backlog(v.name) for v in scenario.explain.variants]
        most = max([most, timed, *(timed + sum(g.tenants for g in b.groups) for b in backlogs)])
    assert most * 10 <= MAX_TENANTS


KILLS = BASE.replace("strategies: [fifo]", "strategies: [procrastinate]")


@pytest.mark.parametrize(
    ("kills", "expected"),
    [
        ("[{worker: 2, at_s: 1}]", "faults.worker_kills[0]: worker 2 does not exist with 2"),
        ("[{at_s: 300}]", "faults.worker_kills[0]: at_s 300 is not before timeout_s"),
        ("[{at_s: 1, every_s: 0.5}]", "faults.worker_kills[0]: every_s 0.5 is not longer than"),
        ("[{at_s: 1, every_s: 5, restart: false}]", "faults.worker_kills[0]: every_s with"),
        ("[{at_s: 1, signal: TERM}]", "worker_kills[0].signal: unknown field; allowed: worker"),
    ],
)
def test_a_worker_kill_that_cannot_happen_is_one_line(
    write_yaml, kills: str, expected: str
) -> None:
    assert expected in refusal(write_yaml(KILLS + f"faults:\n  worker_kills: {kills}\n"))


def test_worker_kills_and_the_harnesss_own_faults_are_not_mixed(write_yaml) -> None:
    text = KILLS + "faults:\n  worker_kills: [{at_s: 1}]\n  crashes: [{worker: 0, at_s: 1}]\n"
    assert "worker_kills (a library's workers) and crashes" in refusal(write_yaml(text))


def test_a_strategy_of_the_harness_is_refused_worker_kills_on_its_line(write_yaml) -> None:
    """Its workers are the harness's own processes: faults.crashes kills them mid-job."""
    text = BASE.replace("strategies: [fifo]", "strategies: [procrastinate, fifo]")
    text += "faults:\n  worker_kills: [{at_s: 1}]\n"
    reason = load_strategies()["fifo"].traits.worker_kills
    assert reason is not None and "faults.crashes" in reason
    expected = f"3: strategies[1]: cannot take faults.worker_kills: {reason}"
    assert refusal(write_yaml(text)) == expected


def test_every_library_takes_worker_kills_and_none_of_the_harnesss_own_faults() -> None:
    shipped = {name: t for name, t in builtin_traits().items() if name not in load_strategies()}
    assert shipped and all(t.worker_kills is None for t in shipped.values())
    assert all("faults.worker_kills" in (t.faults or "") for t in shipped.values())


@pytest.mark.parametrize(
    ("cuts", "expected"),
    [
        ("[{from_s: 290, for_s: 20}]", "faults.backend_kills[0]: its window ends at 310 s"),
        (
            "[{from_s: 1, for_s: 5}, {from_s: 4, for_s: 1}]",
            "faults.backend_kills[1]: its window (from 4 s) overlaps that of "
            "faults.backend_kills[0] (until 6 s)",
        ),
        (
            "[{from_s: 1, for_s: 1, per_s: 50}]",
            "backend_kills[0].per_s: Input should be less than or equal to 20 (got 50)",
        ),
        (
            "[{from_s: 1, for_s: 0}]",
            "backend_kills[0].for_s: Input should be greater than 0 (got 0)",
        ),
    ],
)
def test_a_backend_kill_that_cannot_happen_is_one_line(
    write_yaml, cuts: str, expected: str
) -> None:
    assert expected in refusal(write_yaml(KILLS + f"faults:\n  backend_kills: {cuts}\n"))


def test_backend_kills_beside_a_lease_are_the_harnesss_strategies_not_a_librarys(
    write_yaml,
) -> None:
    """Backend kills cut any queue's workers' sessions; a lease is the harness's own: a
    library refuses it on its line, fifo takes both."""
    faults = "faults:\n  backend_kills: [{from_s: 1, for_s: 1}]\n  lease: {seconds: 1}\n"
    assert refusal(write_yaml(KILLS + faults)).startswith("3: strategies[0]: cannot take faults:")
    load_scenario(write_yaml(BASE + faults), builtin_traits())


def test_the_harnesss_own_strategies_take_backend_kills_and_a_crash_but_not_all(
    write_yaml,
) -> None:
    """Its workers reconnect and look their cut claim up in the claim log, as after a
    server restart: fifo takes both. A strategy that keeps job state beyond the jobs row
    (capped) takes no fault at all, and says so on its line."""
    strategies = load_strategies()
    assert strategies["fifo"].traits.backend_kills is None
    assert strategies["fifo"].traits.server_crash is None
    for faults in ("backend_kills: [{from_s: 1, for_s: 1}]", "server_crash: {at_s: 1}"):
        load_scenario(write_yaml(BASE + f"faults:\n  {faults}\n"), builtin_traits())
        capped = BASE.replace("strategies: [fifo]", "strategies: [fifo, capped]")
        said = refusal(write_yaml(capped + f"faults:\n  {faults}\n"))
        assert said.startswith("3: strategies[1]: cannot take faults.") and "capped" in said


def test_a_server_crash_and_a_server_restart_are_not_mixed(write_yaml) -> None:
    text = BASE + "faults:\n  server_crash: {at_s: 1}\n  server_restart: {at_s: 1.5}\n"
    assert "faults.server_crash and server_restart cannot be in one" in refusal(write_yaml(text))


@pytest.mark.parametrize(
    ("crash", "expected"),
    [
        ("{at_s: 299, down_s: 2}", "faults.server_crash: at_s + down_s (301 s) is not before"),
        ("{at_s: 0}", "faults.server_crash: at_s 0 is not after the last arrival (0 s)"),
        ("{at_s: 1, down_s: 700}", "server_crash.down_s: Input should be less than or equal"),
    ],
)
def test_a_server_crash_that_cannot_be_counted_is_one_line(
    write_yaml, crash: str, expected: str
) -> None:
    assert expected in refusal(write_yaml(KILLS + f"faults:\n  server_crash: {crash}\n"))


def test_a_server_crash_and_a_long_transaction_are_not_mixed(write_yaml) -> None:
    text = KILLS + "faults:\n  server_crash: {at_s: 1}\nlong_transaction: {from_s: 1, for_s: 1}\n"
    assert "faults.server_crash and long_transaction cannot be" in refusal(write_yaml(text))


@pytest.mark.parametrize(
    ("exhaustion", "expected"),
    [
        (
            "{from_s: 290, for_s: 20}",
            "faults.connection_exhaustion: its window ends at 310 s (from_s + for_s), after "
            "timeout_s (300 s)",
        ),
        ("{from_s: 1, for_s: 1, margin: -1}", "connection_exhaustion.margin: Input should be"),
        ("{from_s: 1, for_s: 1, slots: 5}", "connection_exhaustion.slots: unknown field"),
        (
            "{from_s: 1, for_s: 1}\n  server_crash: {at_s: 1}",
            "faults.connection_exhaustion and server_crash cannot be in one scenario",
        ),
    ],
)
def test_a_connection_exhaustion_that_cannot_be_held_is_one_line(
    write_yaml, exhaustion: str, expected: str
) -> None:
    text = KILLS + f"faults:\n  connection_exhaustion: {exhaustion}\n"
    assert expected in refusal(write_yaml(text))


def test_the_harnesss_own_strategies_take_a_connection_exhaustion_but_not_with_crashes(
    write_yaml,
) -> None:
    """fifo takes one (it refuses its workers a reconnect after backend kills); a
    strategy that keeps job state beyond the jobs row takes no fault, this one neither;
    and a worker crash cannot share a scenario with it (its replacement's first
    connection would be refused)."""
    exhaustion = "faults:\n  connection_exhaustion: {from_s: 1, for_s: 1}\n"
    loaded = load_scenario(write_yaml(BASE + exhaustion), builtin_traits())
    assert loaded.scenario.connection_exhaustion is not None
    capped = BASE.replace("[fifo]", "[capped]") + "tenant_cap: 1\n" + exhaustion
    reason = load_strategies()["capped"].traits.connection_exhaustion
    assert refusal(write_yaml(capped)) == (
        f"3: strategies[0]: cannot take faults.connection_exhaustion: {reason}"
    )
    crashes = exhaustion + "  crashes: [{worker: 0, at_s: 0.5}]\n"
    assert "faults.connection_exhaustion and crashes or server_restart cannot be" in refusal(
        write_yaml(BASE + crashes)
    )


@pytest.mark.parametrize(
    ("fault", "refused"),
    [
        (
            "server_crash: {at_s: 1}",
            "faults.server_crash: crashes the server, which only a server the harness starts "
            "can take (--pg embedded or container); this run uses --dsn",
        ),
        (
            "connection_exhaustion: {from_s: 1, for_s: 1}",
            "faults.connection_exhaustion: holds every connection the server has, which "
            "would starve its other clients: it runs on a server the harness starts (--pg "
            "embedded or container); this run uses --dsn",
        ),
    ],
    ids=["server_crash", "connection_exhaustion"],
)
def test_a_fault_that_needs_a_server_of_the_runs_own_is_refused_on_dsn(
    tmp_path: Path, fault: str, refused: str
) -> None:
    """Only a server the harness started can be crashed, and only one without other
    clients filled: one line naming the field's line, no server touched, no folder made."""
    scenario = tmp_path / "fault.yaml"
    scenario.write_text(KILLS + f"timeout_s: 30\nfaults:\n  {fault}\n")
    results = ["--results-dir", str(tmp_path / "results")]
    done = harness_cli("run", str(scenario), "--dsn", "host=/nonexistent port=1", *results)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: {scenario}:11: {refused}"
    assert not (tmp_path / "results").exists()
