# The two commands a user needs: `make bench` and `make test`. Both build the virtual
# environment first, so a fresh clone needs nothing else (Python 3.11+ and make).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# uv installs the locked versions (uv.lock) in seconds; pip brings uv itself, at the
# version the lock pins, so the sync keeps it.
# Bytecode: the harness's every command is imported once after the sync, which compiles
# what it loads (1,450 files, 7 s here); the rest is compiled as a process first imports
# it. uv's --compile-bytecode compiled all 8,044 files of the environment (pandas's,
# scipy's and numpy's own tests among them) in 17 s of a fresh clone's make test.
UV_VERSION := 0.13.9

.PHONY: bench test test-weights test-under-load test-matrix test-slow test-libraries test-adapters test-majors throughput test-heavy check lint format venv lock clean

bench: $(STAMP)
	$(BIN)/harness run scenarios/noisy-neighbour.yaml scenarios/large-tenant-alone.yaml scenarios/skewed-backlog.yaml

# What make test runs (SUITE) and what make test-matrix runs (MATRIX): every marker the
# one leaves out the other selects (tests/unit/test_markers.py holds them to that).
CONSTRAINTS_FLAGS := --frozen --no-dev --no-emit-project --no-hashes --no-header
SUITE := not slow and not libraries and not adapters and not fleets and not majors and not container and not throughput and not heavy and not thorough
MATRIX := slow or libraries or adapters or fleets or majors or container or throughput or heavy or thorough
# make test on every core: each pytest-xdist worker starts its own embedded server and
# has its own temporary folders (tests/integration/conftest.py). Two workers a core: the
# tests wait on their servers, subprocesses and jobs' sleeps as much as they compute (on
# this 2-core machine, at a load of 4-5 from other work, the parallel part took 338 s
# with 4 workers, 502 s with 2). No test needs the machine to itself: a test that
# compares two durations measures both in the same test, under the same load.
# TEST_WORKERS=1 for one process.
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(2 * (os.cpu_count() or 1))')
# Modules to the workers in the order tests/module_order.py sets (see make test).
PARALLEL := -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# Every target's processes write bytecode caches (__pycache__, ignored by git) whatever
# PYTHONDONTWRITEBYTECODE says (CI images often set it; empty is unset to Python). With it
# set, each process would compile what it imports anew: pandas alone is 1.4 s here, the
# harness 0.5 s, and each pytest process rewrote every test module (3 s): 85 s of the
# suite's CPU.
bench test test-under-load test-matrix test-slow test-libraries test-adapters test-majors throughput test-heavy check test-weights lint $(STAMP): export PYTHONDONTWRITEBYTECODE :=

# The modules go to the workers heaviest first, in the order tests/module_order.py sets
# (xdist's own sorts them by their number of tests); make test-weights keeps the last
# make test's figures in tests/module_seconds.json for a fresh clone.
# Both parts run, whatever the other's result: a failure in one hides none in the other.
# make lint runs beside the tests (its 30 s of mypy, on a fresh clone, fill the cores the
# workers leave idle as they finish), its output printed after them.
test: $(STAMP)
	status=0; lint_log=$$(mktemp); \
	$(MAKE) --no-print-directory lint >"$$lint_log" 2>&1 & lint_pid=$$!; \
	$(BIN)/pytest $(PARALLEL) -m "$(SUITE)" || status=$$?; \
	wait $$lint_pid || { status=$$?; echo "make lint failed:"; }; \
	cat "$$lint_log"; rm -f "$$lint_log"; \
	exit $$status

test-weights: $(STAMP)
	$(BIN)/python -m tests.module_order "$(SUITE)"

# make test beside a CPU and a disk load (stress-ng --cpu 1 --io 1, Debian's package;
# .ci/under-load installs it where apt can), as a busy developer machine or a shared CI
# runner is: a test it fails is a bug. .ci/run runs it once, after make test.
test-under-load: $(STAMP)
	.ci/under-load $(MAKE) test

# The matrix, apart from make test (which runs one mapping of each library, one adapter
# smoke test and a fleet's refusals): everything below, the container provider's tests,
# and the `thorough` ones (a behaviour make test covers once, at its other moments,
# signals and roles). CI runs it after make test. Two parts, both run whatever the
# other's result: on every core as make test runs (each worker its own server), then,
# one at a time, the tests that need the machine or the Docker engine to themselves
# (MATRIX_ALONE: the throughput figures only a quiet machine holds; the container
# provider's, one engine; the plan captures of 100,000-job backlogs; the fleets, whose
# members a machine busy with three other workers kept silent past the coordinator's
# SILENT_S of 5 s: one for 23 s, "stopped answering", on 2026-12-04).
MATRIX_ALONE := throughput or container or heavy or fleets
test-matrix: $(STAMP)
	status=0; \
	$(BIN)/pytest $(PARALLEL) -m "($(MATRIX)) and not ($(MATRIX_ALONE))" || status=$$?; \
	$(BIN)/pytest -m "$(MATRIX_ALONE)" || status=$$?; \
	exit $$status

# The tests marked slow (a built wheel installed into fresh environments: the tool as
# people install it, the CI recipe of docs/ci-check.md in another folder).
test-slow: $(STAMP)
	$(BIN)/pytest -m slow

# Every queue library's every mapping through its own code, and its fetch's capture.
test-libraries: $(STAMP)
	$(BIN)/pytest -m libraries

# Every queue adapter in every language (Node, Perl, Ruby: docs/adapters.md): the
# conformance kit on each, each mapping through a repetition, their plan captures. Tests
# whose runtime is missing skip, saying what to install.
test-adapters: $(STAMP)
	$(BIN)/pytest -m adapters

# The trap and the fix on every PostgreSQL major installed (14-18; tests/majors/). A
# major that is not here skips, saying how to get it.
test-majors: $(STAMP)
	$(BIN)/pytest -m majors

# The libraries' throughput runs (71 s here, load 1-2) and the figures that only a quiet
# machine holds (the harness's rate against pgbench's, the calibrated simulator's
# accuracy): outside make test, in make test-matrix.
throughput: $(STAMP)
	$(BIN)/pytest -m throughput

# The tests marked `heavy` (plan captures on backlogs of 100,000 jobs: 100 s here, load
# 1-2): outside make test, in make test-matrix.
test-heavy: $(STAMP)
	$(BIN)/pytest -m heavy

# Dequeue cost against the committed baseline: exit 1 on a regression.
check: $(STAMP)
	$(BIN)/harness check

# Everything that ships, linted and type-checked once: the notebooks too (ruff reads
# .ipynb; mypy reads their code cells, written out by tests/notebook_source.py). One mypy
# for both: a second, with options of its own, would analyse the harness and its
# libraries again for the notebooks' imports (15 of lint's 38 CPU-s on a fresh clone).
LINTED := harness tests hatch_build.py notebooks
lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/python -m tests.notebook_source .mypy_cache/notebooks notebooks/*.ipynb
	$(BIN)/mypy harness .mypy_cache/notebooks

format: $(STAMP)
	$(BIN)/ruff check --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)

venv: $(STAMP)

$(STAMP): pyproject.toml uv.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed: make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv sync --locked --group dev --extra libraries --extra postgres-majors --extra site --python $(BIN)/python
	$(BIN)/python -c 'from harness.commands import load_every_command; load_every_command()'
	@touch $(STAMP)

# After changing a dependency in pyproject.toml: resolve again and commit uv.lock, and the
# action's constraints (action.yml installs the harness with them; a test compares them).
lock: $(STAMP)
	$(BIN)/uv lock
	$(BIN)/uv export $(CONSTRAINTS_FLAGS) --output-file constraints.txt

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache .mypy_cache
