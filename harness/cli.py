"""The `harness` command: each command parses its options and calls one core function."""

from __future__ import annotations

import functools
import inspect
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from typer.core import TyperArgument, TyperOption

from harness.errors import HarnessError, ReportInterrupted, RunFailed, Terminated
from harness.server.kinds import ProviderChoice, ServerOptions

if TYPE_CHECKING:
    from harness.run.scenario_run import RunOptions

app = typer.Typer(
    help="Measure how fairly a PostgreSQL job queue serves many tenants.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion: commands, options, scenario and strategy names
    pretty_exceptions_enable=False,
)
# Logs and CI output are no terminal; rich would fold the tables to 80 columns there.
# No markup: the lines carry paths, names and the server's words, never rich's tags (a
# `[/x]` in a path would stop the command, a `[bold]` vanish); style is asked by style=.
console = Console(width=None if sys.stdout.isatty() else 160, markup=False, log_path=False)
errors = Console(stderr=True, markup=False)
T = TypeVar("T")


def _shown_type(original: Callable[..., str | None]) -> Callable[..., str | None]:
    """The help's type column: the metavar we give (FILE, DIR, URL, NAME, N), nothing for
    a flag, and nothing for an argument (its name column shows its metavar), instead of
    typer's Python types (`<list[Path]>`, `<bool>`)."""

    def shown(param: Any, ctx: Any) -> str | None:
        if isinstance(param, TyperArgument) and param.metavar is not None:
            return None
        if param.metavar is not None:
            return str(param.metavar)
        return None if getattr(param, "is_flag", False) else original(param, ctx)

    return shown


for _parameter in (TyperArgument, TyperOption):
    _parameter.display_type_rich = _shown_type(_parameter.display_type_rich)  # type: ignore[method-assign]


def _complete_scenarios(incomplete: str) -> list[str]:
    from harness.commands.completion import scenario_names

    return scenario_names(incomplete)


def _complete_strategies(incomplete: str) -> list[str]:
    from harness.commands.completion import strategy_names

    return strategy_names(incomplete)


ScenarioFiles = Annotated[
    list[Path],
    typer.Argument(
        metavar="SCENARIO",
        help="Scenario YAML file(s), or the name of a shipped one (harness scenarios).",
        show_default=False,
        autocompletion=_complete_scenarios,
    ),
]
PgOption = Annotated[
    str | None,
    typer.Option(
        "--pg",
        metavar="KIND",
        help="PostgreSQL provider: embedded, container or external.",
        show_default="embedded",
    ),
]
DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        metavar="URL",
        help="Connection URL of your own server (implies --pg external).",
        show_default=False,
    ),
]
ImageOption = Annotated[
    str | None,
    typer.Option(
        "--image",
        metavar="IMAGE",
        help="The image --pg container runs (implies it); postgres:N with --pg-version N.",
        show_default="postgres:17",
    ),
]
MismatchOption = Annotated[
    bool,
    typer.Option(
        "--allow-version-mismatch",
        help="Run on a server of another major than --pg-version asks for.",
    ),
]
PgVersionOption = Annotated[
    str | None,
    typer.Option(
        "--pg-version",
        metavar="MAJORS",
        help="PostgreSQL major(s), comma-separated (e.g. 15,16,17,18): a fresh server of "
        "each in turn, one run folder.",
        show_default="17",
    ),
]
PgBinOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--pg-bin",
        metavar="DIR",
        help="The bin folder of your own PostgreSQL build, for --pg embedded "
        "(repeatable); its major is the one its postgres prints.",
        show_default=False,
    ),
]
ResultsOption = Annotated[
    Path, typer.Option("--results-dir", metavar="DIR", help="Where run folders go.")
]
SlowOption = Annotated[
    bool, typer.Option("--include-slow", help="Also capture the plans the scenario marks as slow.")
]
PlotsOption = Annotated[
    bool,
    typer.Option(
        "--plots/--no-plots",
        help="Draw the figures (PNG and SVG, and in report.html). --no-plots writes every "
        "table and the report without them, sooner; harness report RUN draws them later.",
    ),
]
SchemaOption = Annotated[
    str | None,
    typer.Option(
        "--schema",
        metavar="NAME",
        help="Work in this schema; it must not exist already.",
        show_default="harness_<run id>",
    ),
]
ReuseOption = Annotated[
    bool,
    typer.Option(
        "--reuse-schema",
        help="Take over an existing --schema, only one a killed harness run left behind "
        "(its exact mark, owned by this role, no session of that run connected).",
    ),
]
StrategiesDirOption = Annotated[
    Path | None,
    typer.Option(
        "--strategies-dir",
        metavar="DIR",
        help="Extra strategy .sql files; a file replaces a built-in of its name.",
        show_default=False,
    ),
]
AdaptersDirOption = Annotated[
    Path | None,
    typer.Option(
        "--adapters-dir",
        metavar="DIR",
        help="Extra queue adapters (docs/adapters.md): a folder per adapter, each with its "
        "manifest; one replaces a shipped adapter of its name.",
        show_default=False,
    ),
]


FleetOption = Annotated[
    int,
    typer.Option(
        "--fleet",
        metavar="N",
        min=0,
        max=1000,
        help="Wait for this many `harness worker` members on other hosts and give them the "
        "workers.",
    ),
]
LocalWorkersOption = Annotated[
    int,
    typer.Option(
        "--local-workers",
        metavar="N",
        min=0,
        help="With --fleet: workers of each repetition run here.",
    ),
]
FleetIdOption = Annotated[
    str | None,
    typer.Option(
        "--fleet-id",
        metavar="ID",
        help="With --fleet: the id members join by.",
        show_default="random, printed",
    ),
]
FleetTimeoutOption = Annotated[
    float,
    typer.Option(
        "--fleet-timeout",
        metavar="SECONDS",
        min=1,
        help="With --fleet: seconds the members may take to join.",
    ),
]
ListenOption = Annotated[
    str | None,
    typer.Option(
        "--listen",
        metavar="HOST:PORT",
        help="Embedded server only: also listen on TCP at this loopback address (e.g. "
        "127.0.0.1:0, port 0 = a free one), for fleet members on this host.",
        show_default=False,
    ),
]

RunUserOption = Annotated[
    str | None,
    typer.Option(
        "--run-user",
        metavar="NAME",
        help="Running as root: the user the run's servers and library programs run as "
        "(never root or nobody); by default one made for the run and removed after it.",
        show_default=False,
    ),
]


# The server options, declared once for every command that starts a server: name ->
# (declaration, default). server_options adds them to a command.
_SERVER_OPTIONS: dict[str, tuple[Any, Any]] = {
    "pg": (PgOption, None),
    "dsn": (DsnOption, None),
    "image": (ImageOption, None),
    "pg_version": (PgVersionOption, None),
    "pg_bin": (PgBinOption, None),
    "allow_version_mismatch": (MismatchOption, False),
    "run_user": (RunUserOption, None),
}


def server_options(*, listen: bool = False) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Adds the server options (and --listen, where `listen`) to a command's own, and
    hands the command one ProviderChoice as its `server` parameter, chosen in one place
    (choose_provider) before the command's body runs: a bad option is one line, exit 2."""
    declared = {**_SERVER_OPTIONS, **({"listen": (ListenOption, None)} if listen else {})}

    def decorate(command: Callable[..., T]) -> Callable[..., T]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "server"]
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=a)
            for name, (a, default) in declared.items()
        ]

        @functools.wraps(command)
        def with_server(**values: Any) -> T:
            given = {name: values.pop(name) for name in declared}
            user = given.pop("run_user")
            options = _server_request(given)
            return command(server=_guarded(lambda: _choice(options, user)), **values)

        parameters = [*own, *added]
        with_server.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_server.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_server

    return decorate


def _server_request(given: dict[str, Any]) -> ServerOptions:
    return ServerOptions(**{**given, "pg_bin": tuple(given["pg_bin"] or ())})


def _choice(options: ServerOptions, run_user: str | None) -> ProviderChoice:
    from harness.server.providers import choose_provider
    from harness.server.run_user import choose

    choose(run_user)
    return choose_provider(options, os.environ)


def _show_version(value: bool) -> None:
    if value:
        from harness import __version__

        print(f"harness (tenant-queue-bench) {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Measure how fairly a PostgreSQL job queue serves many tenants."""


def _guarded(action: Callable[[], T]) -> T:
    """Known errors as one line on stderr and an exit code; never a traceback."""

    def on_sigterm(signum: int, frame: object) -> NoReturn:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        return action()
    except HarnessError as error:
        _fail(f"error: {error}", error.exit_code, error)
    except RunFailed as error:
        _fail(f"run failed: {error}", error.exit_code, error)
    except ReportInterrupted as interrupt:
        _fail(
            f"{interrupt}; everything the harness started is stopped; its measurements are "
            f"complete and kept: harness report {interrupt.folder} writes the rest",
            130,
            interrupt,
        )
    except (KeyboardInterrupt, Terminated) as interrupt:
        _fail(
            "interrupted: everything the harness started is stopped; a run it cut short "
            "keeps what it measured, marked interrupted in its run.json",
            130,
            interrupt,
        )
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fail(message: str, code: int, error: BaseException) -> NoReturn:
    """The error's line, then one line for each of its notes (what its cleanup left); an
    error may quote a DSN: never its password."""
    from harness.server.dsn import scrub

    lines = [message, *getattr(error, "__notes__", [])]
    errors.print(scrub("\n".join(lines)), markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@app.command()
@server_options(listen=True)
def run(
    scenarios: ScenarioFiles,
    server: ProviderChoice,
    results_dir: ResultsOption = Path("results"),
    strategies_dir: StrategiesDirOption = None,
    include_slow: SlowOption = False,
    schema: SchemaOption = None,
    reuse_schema: ReuseOption = False,
    fleet: FleetOption = 0,
    local_workers: LocalWorkersOption = 0,
    fleet_id: FleetIdOption = None,
    fleet_timeout: FleetTimeoutOption = 120.0,
    adapters_dir: AdaptersDirOption = None,
    plots: PlotsOption = True,
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            metavar="EXPR",
            help="A bound on a figure, e.g. 'small.wait_p50_s{strategy=fifo} < 0.5' "
            "(repeatable; docs/scenarios.md): exit 1 when one is not kept.",
            show_default=False,
        ),
    ] = None,
    junit: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Also write the thresholds as JUnit XML (a test case each), as the runs end.",
            show_default=False,
        ),
    ] = None,
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            metavar="NAME",
            help="Only this strategy of each scenario (repeatable); the run folder's "
            "scenario.yaml is the scenario as it ran.",
            show_default=False,
            autocompletion=_complete_strategies,
        ),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration",
            metavar="SECONDS",
            help="A horizon's duration_s instead of the scenario's (hours: 7200), up to "
            "its max_duration_s; its phases and streams scale with it (docs/long-horizon.md).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run scenarios: timed workload, plan captures, report.

    On one server (or on each --pg-version major in turn), each scenario's timed
    repetitions, then its plan captures; each one's figures are printed beside the
    reference, and its run folder holds report.html."""
    from harness.run.scenario_run import RunOptions

    options = RunOptions(
        include_slow=include_slow,
        schema=schema,
        reuse_schema=reuse_schema,
        fleet=fleet,
        local_workers=local_workers,
        fleet_id=fleet_id,
        fleet_timeout_s=fleet_timeout,
        adapters_dir=adapters_dir,
        plots=plots,
        thresholds=tuple(threshold or ()),
        duration_s=duration,
        only_strategies=tuple(dict.fromkeys(strategy or ())),
    )
    _run(scenarios, server, results_dir, strategies_dir, options, junit)


@app.command()
def export(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="RESULTS...",
            help="A run folder, its results.json, or a results folder (each scenario's "
            "latest run).",
        ),
    ],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="github-action-benchmark (its custom tools' JSON) or bmf (Bencher's).",
        ),
    ],
    bigger_is_better: Annotated[
        bool,
        typer.Option(
            "--bigger-is-better",
            help="github-action-benchmark: the figures whose better side is higher "
            "(customBiggerIsBetter), not lower.",
        ),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="A new file, never over one."),
    ] = None,
) -> None:
    """Export results.json's figures for a CI benchmark tracker (docs/results-format.md)."""
    from harness.commands.export import export_command

    count = _guarded(lambda: export_command(paths, format, bigger_is_better, output))
    if output is not None:
        console.print(f"{count} figures: {output}", highlight=False)


@app.command()
@server_options()
def explain(
    scenarios: ScenarioFiles,
    server: ProviderChoice,
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            metavar="NAME",
            help="Only this strategy (repeatable).",
            show_default=False,
            autocompletion=_complete_strategies,
        ),
    ] = None,
    variant: Annotated[
        list[str] | None,
        typer.Option(
            "--variant",
            metavar="NAME",
            help="Only this explain variant (repeatable).",
            show_default=False,
        ),
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            "--repeat",
            metavar="N",
            min=1,
            max=100,
            help="JSON executions per capture.",
            show_default="the scenario's explain.repeat",
        ),
    ] = None,
    include_slow: SlowOption = False,
    results_dir: ResultsOption = Path("results"),
    strategies_dir: StrategiesDirOption = None,
    schema: SchemaOption = None,
    reuse_schema: ReuseOption = False,
    adapters_dir: AdaptersDirOption = None,
    plots: PlotsOption = True,
) -> None:
    """Capture dequeue plans only (EXPLAIN ANALYZE, BUFFERS), no timed run.

    On the scenario's backlog and its explain variants, without the timed workload."""
    from harness.run.scenario_run import RunOptions

    options = RunOptions(
        timed=False,
        include_slow=include_slow,
        explain_strategies=strategy,
        explain_variants=variant,
        repeat=repeat,
        schema=schema,
        reuse_schema=reuse_schema,
        adapters_dir=adapters_dir,
        plots=plots,
    )
    _run(scenarios, server, results_dir, strategies_dir, options)


def _run(
    scenarios: list[Path],
    server: ProviderChoice,
    results_dir: Path,
    strategies_dir: Path | None,
    options: RunOptions,
    junit: Path | None = None,
) -> None:
    from harness.commands.run import run_command, write_junit

    outcomes = _guarded(
        lambda: run_command(scenarios, server, results_dir, strategies_dir, options, console)
    )
    if junit is not None:
        _guarded(lambda: write_junit(junit, outcomes))
    if any(outcome.failed_thresholds for outcome in outcomes):
        raise typer.Exit(1)  # each one said, with its measured value, as its run ended


@app.command()
def validate(
    scenarios: ScenarioFiles,
    strategies_dir: StrategiesDirOption = None,
    adapters_dir: AdaptersDirOption = None,
) -> None:
    """Check scenario files without running anything."""
    from harness.commands.validate import validate_command

    _guarded(lambda: validate_command(scenarios, strategies_dir, console, adapters_dir))


@app.command()
@server_options()
def check(
    server: ProviderChoice,
    baseline: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="The baseline.",
            show_default="baselines/dequeue-pgN.json of the major N here, else the shipped one",
        ),
    ] = None,
    probes: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="The probe scenario.",
            show_default="scenarios/dequeue-check.yaml here, else the shipped one",
        ),
    ] = None,
    strategies_dir: StrategiesDirOption = None,
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            metavar="NAME",
            help="Only this strategy (repeatable).",
            show_default="every strategy of --strategies-dir, else the probes' own",
            autocompletion=_complete_strategies,
        ),
    ] = None,
    factor: Annotated[
        float,
        typer.Option(
            metavar="X", min=1.0, help="A timing regression is at least this many times slower ..."
        ),
    ] = 1.5,
    alpha: Annotated[
        float,
        typer.Option(
            metavar="P",
            min=0.0,
            max=1.0,
            help="... and significant at this level (Mann-Whitney U).",
        ),
    ] = 0.01,
    tolerance: Annotated[
        float,
        typer.Option(
            metavar="SHARE",
            min=0.0,
            help="Allowed growth of buffers and rows removed (0.10 = 10 %).",
        ),
    ] = 0.10,
    samples: Annotated[
        int, typer.Option(metavar="N", min=5, max=1000, help="Timed claims per probe.")
    ] = 50,
    update_baseline: Annotated[
        bool, typer.Option("--update-baseline", help="Write a new baseline; show what changed.")
    ] = False,
    markdown: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Also write the verdict and table as markdown (a CI job summary), on every "
            "exit code.",
            show_default=False,
        ),
    ] = None,
    junit: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="Also write JUnit XML, on every exit code.", show_default=False
        ),
    ] = None,
    results_dir: ResultsOption = Path("results"),
) -> None:
    """Check dequeue cost against a baseline (for CI).

    Exit 0 no regression, 1 regression, 2 could not run (nothing measured)."""
    from harness.check.verdict import CheckSettings
    from harness.commands.check import CheckRequest, check_command

    request = CheckRequest(
        baseline=baseline,
        probes=probes,
        update_baseline=update_baseline,
        markdown=markdown,
        junit=junit,
        settings=CheckSettings(tolerance=tolerance, factor=factor, alpha=alpha, samples=samples),
        results_dir=results_dir,
        strategies=tuple(strategy or ()),
    )
    code = _guarded(lambda: check_command(request, server, strategies_dir, console))
    raise typer.Exit(code)


@app.command()
@server_options()
def overhead(
    server: ProviderChoice,
    strategy: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help="The strategy whose claim SQL both run.",
            autocompletion=_complete_strategies,
        ),
    ] = "fifo",
    clients: Annotated[
        int, typer.Option(metavar="N", min=1, max=64, help="pgbench clients = harness workers.")
    ] = 4,
    jobs: Annotated[
        int, typer.Option(metavar="N", min=1, help="Queued jobs drained with 0 ms jobs.")
    ] = 2000,
    work_jobs: Annotated[
        int, typer.Option(metavar="N", min=1, help="Queued jobs drained with --work-ms jobs.")
    ] = 1000,
    work_ms: Annotated[
        int, typer.Option(metavar="MS", min=1, max=10_000, help="The work of a job.")
    ] = 20,
    rounds: Annotated[
        int,
        typer.Option(
            metavar="N", min=1, max=20, help="Runs per arm and load; the median is reported."
        ),
    ] = 3,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when a goal is missed.")] = False,
    results_dir: ResultsOption = Path("results"),
    strategies_dir: StrategiesDirOption = None,
) -> None:
    """Measure the harness's own cost against pgbench.

    Its workers against pgbench running the same claim SQL on the same server, with 0 ms
    jobs and with --work-ms jobs."""
    from harness.commands.overhead import overhead_command
    from harness.experiments.overhead import OverheadSettings

    settings = OverheadSettings(
        strategy=strategy,
        clients=clients,
        jobs=jobs,
        work_jobs=work_jobs,
        work_ms=work_ms,
        rounds=rounds,
    )
    code = _guarded(
        lambda: overhead_command(settings, server, results_dir, strategies_dir, strict, console)
    )
    raise typer.Exit(code)


@app.command()
def report(
    run: Annotated[
        Path,
        typer.Argument(
            metavar="RUN_DIR", help="A run folder, or a suite's folder.", show_default=False
        ),
    ],
    plots: Annotated[
        bool,
        typer.Option(
            "--plots/--no-plots",
            help="Draw the figures. --no-plots rebuilds the tables and report.html only "
            "(figures an earlier render drew are left as they are).",
        ),
    ] = True,
) -> None:
    """Rebuild a run's tables, plots and report.html from its raw files.

    A suite's folder: its tables again, from its runs' folders."""
    from harness.commands.report import report_command

    _guarded(lambda: report_command(run, console, plots=plots))


@app.command(name="compare")
def compare_runs(
    first: Annotated[
        Path, typer.Argument(metavar="RUN_A", help="Run folder A (before).", show_default=False)
    ],
    second: Annotated[
        Path, typer.Argument(metavar="RUN_B", help="Run folder B (after).", show_default=False)
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Where compare.csv, compare.md and the plot go (never overwritten).",
            show_default="results/compare/A-vs-B",
        ),
    ] = None,
    factor: Annotated[
        float, typer.Option(metavar="X", min=1.0, help="A change is at least this large ...")
    ] = 1.5,
    alpha: Annotated[
        float,
        typer.Option(
            metavar="P",
            min=0.0,
            max=1.0,
            help="... and significant at this level (Mann-Whitney U).",
        ),
    ] = 0.01,
    plots: Annotated[
        bool,
        typer.Option(
            "--plots/--no-plots",
            help="Draw the waits' plot (PNG and SVG). --no-plots writes the tables only.",
        ),
    ] = True,
) -> None:
    """Compare the waits of two runs per strategy and tenant class."""
    from harness.commands.compare import compare_command

    target = out or Path("results") / "compare" / f"{first.name}-vs-{second.name}"
    _guarded(lambda: compare_command(first, second, target, factor, alpha, console, plots=plots))


@app.command()
def history(
    results_dir: Annotated[
        Path,
        typer.Argument(
            metavar="RESULTS_DIR", help="The folder the run folders are in (any depth)."
        ),
    ] = Path("results"),
    figure: Annotated[
        list[str] | None,
        typer.Option(
            "--figure",
            metavar="PATTERN",
            help="Trend the figures whose names match this glob, e.g. '*small*median*' "
            "(repeatable).",
            show_default="those with a reference that two runs share",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Where history.csv and history.html go (never overwritten).",
            show_default="RESULTS_DIR/history/<run id>",
        ),
    ] = None,
) -> None:
    """List runs and trend chosen figures across them (a table, and a plot in HTML)."""
    from harness.commands.history import history_command

    _guarded(lambda: history_command(results_dir, figure or [], out, console))


@app.command()
def site(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="RESULTS...",
            help="Run folders, or folders with run folders under them (any depth).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            metavar="DIR",
            help="Where the site goes: a new or empty folder (never written over).",
        ),
    ],
    figure: Annotated[
        list[str] | None,
        typer.Option(
            "--figure",
            metavar="PATTERN",
            help="Trend the figures whose names match this glob (repeatable).",
            show_default="those with a reference that two runs share",
        ),
    ] = None,
) -> None:
    """Build a static results site from run folders (docs/site.md).

    Every library and mapping compared, per-library and per-major pages, figures across
    commits, each number linked to its run's report, the data and the command again."""
    from harness.commands.site import site_command

    _guarded(lambda: site_command(paths, out, figure or [], console))


@app.command(name="docs-tables")
def docs_tables(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="MARKDOWN...",
            help="Markdown files whose harness-table blocks are written (docs/site.md).",
            show_default=False,
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option("--check", help="Compare only: exit 1 naming each table that differs."),
    ] = False,
    keep: Annotated[
        list[Path] | None,
        typer.Option(
            "--keep",
            metavar="RUN_DIR",
            help="Copy this run's documents and derived tables under --into (repeatable).",
        ),
    ] = None,
    into: Annotated[
        Path,
        typer.Option("--into", metavar="DIR", help="Where --keep copies run folders."),
    ] = Path("docs/results"),
) -> None:
    """Write the docs' tables from committed run folders, or check them (for CI).

    Each table is the site's own, of the run folders its marker names; the rest of the
    file is left as it is."""
    from harness.commands.docs_tables import docs_tables_command

    _guarded(lambda: docs_tables_command(files or [], check, keep or [], into, console))


@app.command(name="simulate")
def simulate_scenario(
    scenario: Annotated[
        Path,
        typer.Argument(
            metavar="SCENARIO",
            help="Scenario YAML file or shipped name.",
            show_default=False,
            autocompletion=_complete_scenarios,
        ),
    ],
    workers: Annotated[
        list[int] | None,
        typer.Option(
            "--workers",
            metavar="N",
            min=1,
            max=1_000_000,
            help="Worker count(s) to simulate instead of the scenario's (repeatable).",
            show_default=False,
        ),
    ] = None,
    strategies_dir: StrategiesDirOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Write the summary as CSV there (never overwritten).",
            show_default=False,
        ),
    ] = None,
    calibration: Annotated[
        Path | None,
        typer.Option(
            metavar="RUN_DIR",
            help="A run folder: simulate at the costs measured there (its calibration.json).",
            show_default=False,
        ),
    ] = None,
    measured: Annotated[
        Path | None,
        typer.Option(
            metavar="RUN_DIR",
            help="A run folder of this scenario: its figures beside the prediction.",
            show_default=False,
        ),
    ] = None,
    fit_repetition: Annotated[
        list[int] | None,
        typer.Option(
            "--fit-repetition",
            metavar="N",
            min=1,
            help="Fit the calibration on this repetition of the --calibration run only "
            "(repeatable); --measured on the same run then compares the others.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Simulate a scenario's ideal schedule, no database.

    The ideal schedule of every strategy with a simulator policy; with --calibration, at a
    run's measured costs."""
    from harness.commands.simulate import simulate_command

    _guarded(
        lambda: simulate_command(
            scenario, workers, strategies_dir, out, console, calibration, measured, fit_repetition
        )
    )


@app.command()
@server_options()
def isolation(
    server: ProviderChoice,
    jobs: Annotated[int, typer.Option(metavar="N", min=1, help="Jobs per pool and mode.")] = 400,
    tenants: Annotated[
        int, typer.Option(metavar="N", min=2, help="Tenants the jobs belong to.")
    ] = 8,
    unset_share: Annotated[
        float,
        typer.Option(
            metavar="SHARE",
            min=0.0,
            max=1.0,
            help="Share of jobs on the path that never sets the tenant.",
        ),
    ] = 0.1,
    workers: Annotated[int, typer.Option(metavar="N", min=1, help="Worker threads.")] = 4,
    pool_size: Annotated[
        int, typer.Option(metavar="N", min=1, help="Server connections the workers share.")
    ] = 2,
    pool: Annotated[
        str,
        typer.Option(
            metavar="KIND", help="psycopg (psycopg_pool), pgbouncer (transaction mode) or all."
        ),
    ] = "all",
    seed: Annotated[int, typer.Option(metavar="N", help="Seeds each job's tenant and path.")] = 1,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 if a job under SET LOCAL leaked.")
    ] = False,
    results_dir: ResultsOption = Path("results"),
) -> None:
    """Count tenant leaks under row-level security through pools: SET against SET LOCAL.

    Jobs through pooled connections, the tenant set by SET and by SET LOCAL: the jobs that
    saw or wrote another tenant's rows."""
    from harness.commands.isolation import isolation_command
    from harness.experiments.isolation import IsolationSettings

    settings = IsolationSettings(
        jobs=jobs,
        tenants=tenants,
        unset_share=unset_share,
        workers=workers,
        pool_size=pool_size,
        seed=seed,
    )
    code = _guarded(lambda: isolation_command(settings, pool, strict, server, results_dir, console))
    raise typer.Exit(code)


@app.command()
def worker(
    run_id: Annotated[
        str,
        typer.Option(
            "--run",
            metavar="ID",
            help="The fleet run's id, as `harness run --fleet N` printed it.",
            show_default=False,
        ),
    ],
    dsn: Annotated[
        str | None,
        typer.Option(
            "--dsn",
            metavar="URL",
            help="This host's way to the run's server (or the PG* variables).",
            show_default=False,
        ),
    ] = None,
    join_timeout: Annotated[
        float,
        typer.Option(
            "--join-timeout",
            metavar="SECONDS",
            min=0,
            help="Seconds to wait for the coordinator to open the run (a launcher may "
            "start the members first); 0: refused at once if it is not open.",
        ),
    ] = 120.0,
    strategies_dir: StrategiesDirOption = None,
    adapters_dir: AdaptersDirOption = None,
    run_user: RunUserOption = None,
) -> None:
    """Join a fleet run as a member, running its share of the workers here.

    Its share of every repetition's workers runs on this host until the run ends (exit 0),
    fails (1) or refuses this member (2)."""
    from harness.commands.worker import worker_command
    from harness.server.run_user import choose

    _guarded(lambda: choose(run_user))
    _guarded(
        lambda: worker_command(dsn, run_id, strategies_dir, console, adapters_dir, join_timeout)
    )


@app.command()
def scenarios() -> None:
    """List the shipped scenarios, which run by name (harness run noisy-neighbour)."""
    from harness.commands.scenarios import scenarios_command

    _guarded(lambda: scenarios_command(console))


@app.command()
def schema() -> None:
    """Print the JSON Schema of scenario files (for editors: docs/scenario.schema.json)."""
    from harness.commands.schema import schema_command

    _guarded(schema_command)


@app.command(name="sql")
def show_sql(
    strategy: Annotated[
        str,
        typer.Argument(
            metavar="STRATEGY",
            help="Strategy name, e.g. fifo or round_robin.",
            show_default=False,
            autocompletion=_complete_strategies,
        ),
    ],
    strategies_dir: StrategiesDirOption = None,
    adapters_dir: AdaptersDirOption = None,
) -> None:
    """Print a strategy's SQL exactly as the workers run it."""
    from harness.commands.sql import sql_command

    _guarded(lambda: sql_command(strategy, strategies_dir, adapters_dir))


@app.command(name="adapter-test")
@server_options()
def adapter_test(
    server: ProviderChoice,
    adapter: Annotated[
        str,
        typer.Argument(
            metavar="ADAPTER", help="A declared adapter's name, e.g. minion.", show_default=False
        ),
    ],
    adapters_dir: AdaptersDirOption = None,
) -> None:
    """Check a queue adapter with the conformance kit (docs/adapters.md).

    Exit 0 if every check passes, 1 with a line per failed check."""
    from harness.commands.adapter_test import adapter_test_command

    code = _guarded(lambda: adapter_test_command(adapter, adapters_dir, server, console))
    raise typer.Exit(code)


def main() -> None:
    """The `harness` program: the commands, then an exit that a late Ctrl-C leaves alone.

    Once a command has returned or failed, its work is done and its line printed; a
    SIGINT from then on would only interrupt the interpreter's shutdown (its atexit
    handlers, logging's among them) and print that traceback: CI's interrupt test hit
    it on an `explain` that finished as the signal came."""
    # `python -m harness` is `harness`; an installed program is named as it was called
    # (harness, or tenant-queue-bench where another `harness` is on the PATH).
    called = Path(sys.argv[0]).name if sys.argv else ""
    try:
        app(prog_name="harness" if called in ("", "__main__.py") else called)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    main()
