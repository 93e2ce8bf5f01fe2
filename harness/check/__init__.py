"""`harness check`: the probes measured, compared with a baseline, and the verdict."""
