"""The adapter contract's Python side (docs/adapters.md): `kit.serve(module)` makes a
module of a few functions an adapter program, run by the harness's own interpreter
(`command = ["{python}", "adapter.py"]` in its manifest), as the Node runner does for
pg-boss and graphile-worker."""
