from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.scenario.loader import LoadedSuite, load_any, load_scenario
from harness.scenario.traits import ANY
from tests.conftest import SCENARIOS, SHORT_NOISY, builtin_traits

STRATEGIES = dict.fromkeys(["fifo", "round_robin"], ANY)


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path: Path) -> None:
    loaded = load_any(path, builtin_traits())
    name = loaded.suite.name if isinstance(loaded, LoadedSuite) else loaded.scenario.name
    assert name == path.stem
    assert len(loaded.sha256) == 64


def test_noisy_neighbour_is_the_articles_workload() -> None:
    scenario = load_scenario(SCENARIOS / "noisy-neighbour.yaml", STRATEGIES).scenario
    large, small = scenario.tenant_groups
    assert (large.tenants, large.jobs_per_tenant, large.duration_ms, large.enqueue_at_s) == (
        1,
        1000,
        20,
        0,
    )
    assert (small.tenants, small.jobs_per_tenant, small.duration_ms, small.enqueue_at_s) == (
        10,
        5,
        20,
        1.0,
    )
    assert scenario.workers == [4]
    assert scenario.repetitions >= 2


def test_one_worker_count_is_a_sweep_of_one(write_yaml) -> None:
    loaded = load_scenario(write_yaml(SHORT_NOISY), STRATEGIES)
    assert loaded.scenario.workers == [2]


def error_for(write_yaml, text: str) -> str:
    path = write_yaml(text)
    with pytest.raises(HarnessError) as caught:
        load_scenario(path, STRATEGIES)
    message = str(caught.value)
    assert "\n" not in message, "errors are one line"
    assert message.startswith(str(path) + ":")
    return message.removeprefix(str(path) + ":")


def test_an_unknown_field_names_its_line_and_the_allowed_ones(write_yaml) -> None:
    text = SHORT_NOISY.replace(
        "    duration_ms: 5\n  - name: small",
        "    duration_ms: 5\n    colour: red\n  - name: small",
    )
    message = error_for(write_yaml, text)
    assert message.startswith("12: tenant_groups[0].colour: unknown field; allowed: name, ")


def test_an_unknown_field_with_a_line_break_in_its_name_stays_one_line(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY + '"a\\nb": 1\n')
    assert ": 'a\\nb': unknown field; allowed: name, " in message


def test_a_negative_duration_names_the_field_and_the_bound(write_yaml) -> None:
    text = SHORT_NOISY.replace(
        "duration_ms: 5\n  - name: small", "duration_ms: -5\n  - name: small"
    )
    message = error_for(write_yaml, text)
    assert message == (
        "11: tenant_groups[0].duration_ms: Input should be greater than or equal to 0 (got -5)"
    )


def test_zero_workers_are_refused(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY.replace("workers: 2", "workers: 0"))
    assert message == "2: workers[0]: Input should be greater than or equal to 1 (got 0)"


def test_an_unknown_strategy_lists_the_available_ones(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY.replace("[fifo, round_robin]", "[fifo, lifo]"))
    assert message == "3: strategies: unknown 'lifo'; available: fifo, round_robin"


def test_a_misspelt_strategy_names_the_one_meant(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY.replace("[fifo, round_robin]", "[round_robbin]"))
    assert message == "3: strategies: unknown 'round_robbin'; did you mean round_robin?"


def test_a_timed_run_without_workers_is_refused(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY.replace("workers: 2\n", ""))
    assert message == (
        "1: workers is required when tenant_groups arrive or the backlog is drained "
        "(e.g. workers: 4)"
    )


def test_a_missing_field_is_named_at_its_item(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY.replace("    tenants: 5\n", ""))
    assert message == "12: tenant_groups[1].tenants: required field is missing"


def test_duplicate_group_names_are_refused(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY.replace("name: small", "name: large"))
    assert "tenant group names must be unique; repeated: ['large']" in message


def test_too_many_jobs_are_refused(write_yaml) -> None:
    text = SHORT_NOISY.replace("jobs_per_tenant: 200\n", "jobs_per_tenant: 1000000\n").replace(
        "tenants: 5\n    jobs_per_tenant: 2\n", "tenants: 100000\n    jobs_per_tenant: 50\n"
    )
    message = error_for(write_yaml, text)
    assert message == "1: 6,000,000 jobs in all; at most 5,000,000"


def test_a_reference_to_an_unknown_class_is_refused(write_yaml) -> None:
    text = (
        SHORT_NOISY
        + """reference:
  source: test
  figures:
    - {label: x, metric: wait_p50_s, strategy: fifo, tenant_class: medium, value: 1}
"""
    )
    message = error_for(write_yaml, text)
    assert "tenant_class 'medium' is not a tenant group ['large', 'small']" in message


def test_bad_yaml_gives_its_line(write_yaml) -> None:
    message = error_for(write_yaml, "name: x\nworkers: [1, 2\nstrategies: [fifo]\n")
    assert message.startswith("3: not valid YAML")


def test_a_list_instead_of_a_mapping_is_refused(write_yaml) -> None:
    assert error_for(write_yaml, "- a\n- b\n").startswith("1: a scenario is a mapping")


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="cannot read scenario"):
        load_scenario(tmp_path / "nope.yaml", STRATEGIES)


SKEWED = """\
name: skewed
strategies: [round_robin]
backlog:
  groups:
    - {name: large, tenants: 1, jobs_per_tenant: 100}
    - {name: idle, tenants: 5, jobs_per_tenant: 0}
explain:
  variants:
    - name: more
      tenants: {idle: 50}
"""


def test_a_plans_only_scenario_needs_no_workers(write_yaml) -> None:
    scenario = load_scenario(write_yaml(SKEWED), STRATEGIES).scenario
    assert not scenario.timed
    assert scenario.explain_strategies == ["round_robin"]


def test_explain_without_a_backlog_is_refused(write_yaml) -> None:
    text = "name: x\nstrategies: [fifo]\nexplain: {}\n"
    assert "explain needs a backlog" in error_for(write_yaml, text)


def test_a_scenario_with_nothing_to_run_is_refused(write_yaml) -> None:
    text = "name: x\nstrategies: [fifo]\n"
    assert "nothing to run" in error_for(write_yaml, text)


def test_a_variant_naming_an_unknown_group_is_refused(write_yaml) -> None:
    message = error_for(write_yaml, SKEWED.replace("{idle: 50}", "{busy: 50}"))
    assert "explain variant 'more': ['busy'] are not backlog groups" in message


def test_a_variant_grows_a_groups_backlog_per_tenant(write_yaml) -> None:
    """`jobs_per_tenant` reshapes the queued jobs as `tenants` the tenant counts, both
    checked against the backlog's limits."""
    grown = SKEWED.replace("tenants: {idle: 50}", "jobs_per_tenant: {large: 1000000}")
    scenario = load_scenario(write_yaml(grown), STRATEGIES).scenario
    assert scenario.variant_backlog("more").total_jobs == 1_000_000
    assert scenario.backlog is not None and scenario.backlog.total_jobs == 100
    unknown = grown.replace("{large: 1000000}", "{busy: 10}")
    assert "['busy'] are not backlog groups" in error_for(write_yaml, unknown)
    huge = grown.replace("{large: 1000000}", "{large: 10000001}")
    assert "less than or equal to 10000000" in error_for(write_yaml, huge)


def test_a_rotation_must_list_every_group_once(write_yaml) -> None:
    text = SKEWED.replace("explain:", "  rotation: [idle]\nexplain:")
    assert "rotation must list each backlog group once" in error_for(write_yaml, text)


def test_unknown_explain_strategies_are_refused_at_their_line(write_yaml) -> None:
    text = SKEWED.replace("explain:\n", "explain:\n  strategies: [lifo]\n")
    message = error_for(write_yaml, text)
    assert message == ("8: explain.strategies: unknown 'lifo'; available: fifo, round_robin")


def test_a_plan_figure_must_name_an_explain_variant(write_yaml) -> None:
    text = (
        SKEWED
        + """reference:
  source: t
  figures:
    - {label: x, metric: plan_total_ms, strategy: round_robin, variant: less, value: 1}
"""
    )
    assert "variant must be one of the explain variants ['more']" in error_for(write_yaml, text)


def test_a_cap_check_needs_a_cap(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY + "checks: [tenant_cap]\n")
    assert message == "17: checks: tenant_cap needs the scenario's tenant_cap (e.g. 2)"


def test_an_unknown_check_lists_the_known_ones(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY + "checks: [fairness]\n")
    assert message.startswith("17: checks[0]: Input should be 'never_stranded', ")


GROUP = "name: w\nworkers: 2\nstrategies: [fifo]\ntenant_groups:\n  - {name: g, tenants: 3, "


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ("jobs_per_tenant: 2}", "each job needs a duration"),
        (
            "jobs_per_tenant: 2, duration_ms: 1, "
            "duration: {distribution: exponential, mean_ms: 5}}",
            "not both",
        ),
        (
            "jobs_per_tenant: 2, duration: {distribution: gamma, mean_ms: 5}}",
            "tenant_groups[0].duration: Input tag 'gamma'",
        ),
        (
            "jobs_per_tenant: 2, duration: {distribution: uniform, low_ms: 5, high_ms: 1}}",
            "high_ms 1 is below low_ms 5",
        ),
        (
            "jobs_per_tenant: 2, duration: {distribution: lognormal, median_ms: 5, sigma: 9}}",
            "tenant_groups[0].duration.lognormal.sigma: Input should be less than or equal to 4",
        ),
        ("duration_ms: 1}", "a burst needs jobs_per_tenant"),
        ("jobs: 100, duration_ms: 1}", "give zipf_s"),
        ("jobs_per_tenant: 2, jobs: 5, zipf_s: 1, duration_ms: 1}", "one of them"),
        ("arrival: poisson, rate_per_s: 10, duration_ms: 1}", "needs rate_per_s and window_s"),
        (
            "arrival: poisson, rate_per_s: 10, window_s: 2, jobs_per_tenant: 1, duration_ms: 1}",
            "jobs_per_tenant and jobs are for bursts",
        ),
        (
            "arrival: fast, jobs_per_tenant: 1, duration_ms: 1}",
            "Input should be 'burst' or 'poisson'",
        ),
        (
            "arrival: poisson, rate_per_s: 100000, window_s: 86400, duration_ms: 1}",
            "8,640,000,000 jobs in all; at most 5,000,000",
        ),
    ],
)
def test_workload_fields_are_refused_with_what_is_allowed(
    write_yaml, fields: str, expected: str
) -> None:
    assert expected in error_for(write_yaml, GROUP + fields + "\n")


def test_a_seed_must_be_a_non_negative_integer(write_yaml) -> None:
    text = GROUP + "jobs_per_tenant: 2, duration_ms: 1}\nseed: -3\n"
    assert "seed: Input should be greater than or equal to 0 (got -3)" in error_for(
        write_yaml, text
    )


def test_a_long_transaction_is_read_with_its_defaults(write_yaml) -> None:
    path = write_yaml(SHORT_NOISY + "long_transaction: {from_s: 0.5, for_s: 8}\n")
    hold = load_scenario(path, STRATEGIES).scenario.long_transaction
    assert hold is not None
    assert (hold.from_s, hold.for_s, hold.sample_ms, hold.vacuum_after) == (0.5, 8, 200, False)


def test_a_long_transaction_without_its_length_is_refused(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY + "long_transaction: {from_s: 0.5}\n")
    assert message == "17: long_transaction.for_s: required field is missing"


def test_a_long_transaction_of_no_length_is_refused(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY + "long_transaction: {from_s: 1, for_s: 0}\n")
    assert message == "17: long_transaction.for_s: Input should be greater than 0 (got 0)"


def test_a_long_transaction_with_an_unknown_field_lists_the_allowed_ones(write_yaml) -> None:
    text = SHORT_NOISY + "long_transaction: {from_s: 1, for_s: 2, isolation: serializable}\n"
    message = error_for(write_yaml, text)
    assert message == (
        "17: long_transaction.isolation: unknown field; allowed: "
        "from_s, for_s, sample_ms, vacuum_after, explain_fetches"
    )


def test_a_long_transaction_past_the_timeout_is_refused(write_yaml) -> None:
    message = error_for(write_yaml, SHORT_NOISY + "long_transaction: {from_s: 30, for_s: 30}\n")
    assert message == (
        "17: long_transaction.for_s: the hold ends at 60 s, not before the scenario's timeout_s=60"
    )


def test_a_long_transaction_needs_a_timed_run(write_yaml) -> None:
    text = """\
name: plans
strategies: [fifo]
backlog:
  groups: [{name: large, tenants: 1, jobs_per_tenant: 10}]
explain: {}
long_transaction: {from_s: 0, for_s: 1}
"""
    message = error_for(write_yaml, text)
    assert message.startswith("1: long_transaction needs a timed run (tenant_groups)")


def test_faults_and_a_long_transaction_are_not_combined(write_yaml) -> None:
    text = (
        GROUP
        + "jobs_per_tenant: 2, duration_ms: 1}\n"
        + "faults: {crashes: [{worker: 0, at_s: 0.1}]}\n"
        + "long_transaction: {from_s: 0.1, for_s: 1}\n"
    )
    assert "long_transaction and faults are measured apart" in error_for(write_yaml, text)
