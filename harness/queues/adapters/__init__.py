"""The queues the harness drives through the adapter contract (docs/adapters.md): a
folder each, with its manifest; `python/` is the contract's Python side, which the
Python libraries' adapters run on."""
