"""The adversarial scenarios' parts without a server: a tenant under several keys, the
mappings a scenario picks by what they declare, the idle window and its record, and the
table the scenarios are read by."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.fairness import repetition_fairness, tenant_table
from harness.analysis.mappings import mapping_table
from harness.analysis.waits import with_waits
from harness.errors import HarnessError
from harness.queues.catalog import catalog, traits
from harness.run.idle import NO_MARKER, NO_STATS, Snapshot, fetch_calls, window_record
from harness.scenario.loader import load_scenario
from harness.scenario.model import Scenario
from harness.scenario.workload import generate, tenant_classes, tenant_owners
from tests.conftest import builtin_traits

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "adapters"
T0 = pd.Timestamp("2026-01-01", tz="UTC")


def sybil(**flood: object) -> Scenario:
    groups = [
        {"name": "sybil", "tenants": 2, "keys": 3, "jobs_per_tenant": 7, "duration_ms": 1, **flood},
        {"name": "small", "tenants": 2, "jobs_per_tenant": 2, "duration_ms": 1},
    ]
    return Scenario.model_validate(
        {"name": "s", "strategies": ["fifo"], "workers": 2, "tenant_groups": groups}
    )


def test_a_tenants_jobs_are_dealt_over_its_keys_in_turn() -> None:
    scenario = sybil()
    ids = generate(scenario).tenant_ids.tolist()
    # tenant 1's keys 1-3, tenant 2's keys 4-6, then the small tenants 7 and 8
    assert ids == [1, 2, 3, 1, 2, 3, 1, 4, 5, 6, 4, 5, 6, 4, 7, 7, 8, 8]
    assert tenant_owners(scenario) == {1: 1, 2: 1, 3: 1, 4: 4, 5: 4, 6: 4}
    assert set(tenant_classes(scenario)) == set(range(1, 9))
    assert scenario.expected_jobs == 2 * 7 + 2 * 2


def test_a_tenant_of_one_key_is_its_own_owner() -> None:
    assert tenant_owners(sybil(keys=1)) == {}
    assert generate(sybil(keys=1)).tenant_ids.tolist()[:7] == [1] * 7


def test_keys_count_towards_the_tenants_cap_and_are_for_bursts() -> None:
    with pytest.raises(ValueError, match="100,000 in all"):
        sybil(tenants=200, keys=1000)
    poisson = {"arrival": "poisson", "rate_per_s": 10, "window_s": 1, "jobs_per_tenant": None}
    with pytest.raises(ValueError, match="keys deals a burst"):
        sybil(**poisson)


def job(job_id: int, tenant: int, tenant_class: str, started: float, strategy: str = "x") -> dict:
    return {
        "scenario": "s",
        "strategy": strategy,
        "workers": 1,
        "repetition": 1,
        "job_id": job_id,
        "tenant_id": tenant,
        "tenant_class": tenant_class,
        "enqueued_at": T0,
        "started_at": T0 + pd.Timedelta(seconds=started),
        "finished_at": T0 + pd.Timedelta(seconds=started + 1),
        "duration_ms": 1000.0,
        "claim_ms": 1.0,
    }


def test_a_sybils_keys_are_one_tenant_in_the_fairness_figures() -> None:
    # keys 1 and 2 are one sybil tenant's; tenant 3 waits behind both
    jobs = pd.DataFrame([job(1, 1, "sybil", 0), job(2, 2, "sybil", 1), job(3, 3, "small", 2)])
    as_keys = tenant_table(with_waits(jobs))
    as_tenants = tenant_table(with_waits(jobs), {1: 1, 2: 1})
    assert len(as_keys) == 3
    assert sorted(as_tenants["tenant_id"]) == [1, 3]
    sybil_row = as_tenants.set_index("tenant_id").loc[1]
    assert (sybil_row["jobs"], sybil_row["makespan_s"], sybil_row["alone_s"]) == (2, 2.0, 2.0)
    # slowdowns 1 (the sybil: alone it takes as long) and 3 (the small tenant)
    jain = repetition_fairness(as_tenants)["jain_index"].iloc[0]
    assert jain == pytest.approx(16 / (2 * 10))


def test_the_mappings_table_sets_the_others_waits_beside_the_floods_price() -> None:
    jobs = pd.DataFrame(
        [
            job(1, 1, "flood", 0, "fifo"),
            job(2, 1, "flood", 1, "fifo"),
            job(3, 2, "small", 2, "fifo"),
            job(1, 1, "flood", 1, "rr"),
            job(2, 1, "flood", 2, "rr"),
            job(3, 2, "small", 0, "rr"),
        ]
    )
    table = mapping_table(jobs, None, None)
    assert table is not None
    rows = table.set_index("strategy")
    assert rows.loc["fifo", "others_wait_p50_s"] == 2
    assert rows.loc["rr", "others_wait_p50_s"] == 0
    assert (rows.loc["fifo", "flood_makespan_s"], rows.loc["rr", "flood_makespan_s"]) == (2, 3)
    assert rows.loc["rr", "flood_vs_first"] == pytest.approx(1.5)
    assert set(rows["flood_class"]) == {"flood"}
    assert rows["idle_fetches_per_s"].isna().all()


def test_libraries_picks_every_mapping_by_its_declared_settings(write_yaml) -> None:
    entries = traits(catalog())
    text = "name: x\nstrategies: [fifo]\nworkers: 2\nlibraries: {settings: [%s]}\n"
    text += "tenant_groups: [{name: a, tenants: 1, jobs_per_tenant: 1, duration_ms: 1}]\n"
    default = load_scenario(write_yaml(text % "default"), entries).scenario.strategies
    tuned = load_scenario(write_yaml(text % "tuned"), entries).scenario.strategies
    declared = {name: t.declared for name, t in entries.items() if t.declared is not None}
    assert default[0] == "fifo" and tuned[0] == "fifo"
    assert {declared[name].setting for name in default[1:]} == {"default"}
    assert {declared[name].setting for name in tuned[1:]} == {"tuned"}
    recovery = {name for name, d in declared.items() if d.setting == "recovery"}
    assert recovery and not recovery & {*default, *tuned}
    assert set(default[1:]) | set(tuned[1:]) | recovery == set(declared)


def test_an_adapter_of_another_folder_joins_without_an_edit(write_yaml) -> None:
    text = "name: x\nstrategies: [fifo]\nworkers: 2\nlibraries: {leave_out: [minion, twice]}\n"
    text += "tenant_groups: [{name: a, tenants: 1, jobs_per_tenant: 1, duration_ms: 1}]\n"
    entries = traits(catalog(adapters_dir=FIXTURES))
    chosen = load_scenario(write_yaml(text), entries).scenario.strategies
    assert "pyqueue" in chosen and "twice" not in chosen
    assert not any(name.startswith("minion") for name in chosen)


def test_leave_out_names_what_the_harness_knows(write_yaml) -> None:
    text = "name: x\nstrategies: [fifo]\nworkers: 2\nlibraries: {leave_out: [nosuch]}\n"
    text += "tenant_groups: [{name: a, tenants: 1, jobs_per_tenant: 1, duration_ms: 1}]\n"
    with pytest.raises(HarnessError, match=r":4: libraries.leave_out\[0\]: 'nosuch' is no"):
        load_scenario(write_yaml(text), builtin_traits())


IDLE = {
    "name": "x",
    "strategies": ["fifo"],
    "workers": 2,
    "timeout_s": 60,
    "idle": {"from_s": 2, "for_s": 5},
}


@pytest.mark.parametrize(
    ("late_at_s", "refusal"),
    [
        (3.0, r"tenant_groups\[1\]: its jobs arrive from 3 s to 3 s, within idle's window"),
        (1.0, "no tenant group arrives after the window"),
        (7.0, None),
    ],
)
def test_the_idle_window_is_idle_and_the_run_goes_on_past_it(
    late_at_s: float, refusal: str | None
) -> None:
    groups = [
        {"name": "a", "tenants": 3, "jobs_per_tenant": 1, "duration_ms": 1},
        {"name": "late", "tenants": 1, "jobs_per_tenant": 1, "duration_ms": 1},
    ]
    groups[1]["enqueue_at_s"] = late_at_s
    if refusal is None:
        assert Scenario.model_validate({**IDLE, "tenant_groups": groups}).idle is not None
        return
    with pytest.raises(ValueError, match=refusal):
        Scenario.model_validate({**IDLE, "tenant_groups": groups})


def test_fetches_are_counted_by_the_marker_as_pg_stat_statements_shows_it() -> None:
    before = {(1, "SELECT 1"): 5, (2, "UPDATE job SET status = $1 WHERE x"): 10}
    after = {
        (1, "SELECT 1"): 50,
        (2, "UPDATE job SET status = $1 WHERE x"): 30,
        (3, "select id from jobs for update skip locked"): 7,
        (4, "SELECT x FROM w ORDER BY w.created_at ASC \n LIMIT $1"): 3,
    }
    assert fetch_calls(before, after, "SET status = 'picked'") == 20
    assert fetch_calls(before, after, "FOR UPDATE SKIP LOCKED") == 7
    assert fetch_calls(before, after, "read_ct = read_ct + 1") == 0
    assert fetch_calls(before, after, "created_at ASC LIMIT") == 3  # spacing collapsed
    after[(5, "WHERE jobs.is_available = $2")] = 9
    assert fetch_calls(before, after, "jobs.is_available = true") == 9


def test_the_windows_record_and_what_it_could_not_measure() -> None:
    # process 7 grew by 40 ticks, 8 started in the window (10), 9 ended in it (uncounted)
    first = Snapshot(10.0, {(1, "x skip locked"): 4, (2, "begin"): 4}, {7: 100, 9: 500}, 75)
    last = Snapshot(
        12.0, {(1, "x skip locked"): 24, (2, "begin"): 24, (3, "y"): 1}, {7: 140, 8: 10}, 75
    )
    record = window_record(first, last, "skip locked")
    assert record["window_s"] == 2.0
    assert (record["fetches"], record["statements"], record["jobs_done"]) == (20, 41, 0)
    assert record["server_cpu_s"] == pytest.approx(50 / os.sysconf("SC_CLK_TCK"))
    assert record["unmeasured"] is None
    unknown = window_record(first, last, None)
    assert unknown["fetches"] is None and unknown["statements"] == 41
    assert unknown["unmeasured"] == NO_MARKER
    uncounted = window_record(Snapshot(0, None, None, 0), Snapshot(1, None, None, 0), "m")
    assert uncounted["fetches"] is None and uncounted["server_cpu_s"] is None
    assert uncounted["unmeasured"].startswith(NO_STATS)
