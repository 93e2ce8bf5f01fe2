"""Experiments beside the scenario runs: tenant isolation under pooling, and the
harness's own overhead against pgbench."""
