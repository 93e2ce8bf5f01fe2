# The two commands a user needs: `make bench` and `make test`. Both build the virtual
# environment first, so a fresh clone needs nothing else (Python 3.11+ and make).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: bench test check lint format venv clean

bench: $(STAMP)
	$(BIN)/harness run scenarios/noisy-neighbour.yaml scenarios/large-tenant-alone.yaml scenarios/skewed-backlog.yaml

test: $(STAMP)
	$(BIN)/ruff check harness tests
	$(BIN)/ruff format --check harness tests
	$(BIN)/mypy
	$(BIN)/pytest

# Dequeue cost against the committed baseline: exit 1 on a regression.
check: $(STAMP)
	$(BIN)/harness check

lint: $(STAMP)
	$(BIN)/ruff check harness tests
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix harness tests
	$(BIN)/ruff format harness tests

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed: make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,libraries]'
	@touch $(STAMP)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache .mypy_cache
