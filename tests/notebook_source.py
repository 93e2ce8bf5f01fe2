"""The code cells of notebooks as Python modules, for mypy (which reads no .ipynb):
`python -m tests.notebook_source OUT NOTEBOOK...` writes OUT/<notebook>.py for each, the
cells in order, a line's IPython magic (`%`, `!`) commented out."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat


def module_source(notebook: Path) -> str:
    """The notebook's code cells, one after another, as one module's text."""
    cells = nbformat.read(notebook, as_version=4).cells
    code = [cell.source for cell in cells if cell.cell_type == "code"]
    lines = "\n\n".join(code).splitlines()
    return "\n".join(_plain(line) for line in lines) + "\n"


def _plain(line: str) -> str:
    return f"# {line}" if line.lstrip().startswith(("%", "!")) else line


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m tests.notebook_source OUT NOTEBOOK...", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.py"):
        stale.unlink()
    for name in argv[1:]:
        notebook = Path(name)
        (out / f"{notebook.stem.replace('-', '_')}.py").write_text(module_source(notebook))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
