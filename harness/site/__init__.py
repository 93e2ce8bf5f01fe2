"""The results site (`harness site`): static pages from run folders (harness/site/build.py)."""
