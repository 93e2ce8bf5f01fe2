"""A queue in any language: the adapter contract, protocol 2 (docs/adapters.md).

An adapter is a program that speaks JSON lines (its config and commands on stdin, its
events on stdout), declared by a TOML manifest (manifest.py); ContractQueue (queue.py)
runs any declared adapter as an implementation of the queue seam."""
