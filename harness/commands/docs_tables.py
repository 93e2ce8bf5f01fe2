"""`harness docs-tables`: the docs' tables written, or checked, from committed run folders
(harness/site/markdown.py); `--keep` copies a run folder's documents and derived tables
where the docs read them."""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

from rich.console import Console

from harness.errors import HarnessError
from harness.results.document import load_document
from harness.site.markdown import KEPT, refreshed


class TablesDiffer(HarnessError):
    """`--check`: a table is not what its run folders give. Exit code 1, as a check that
    failed; nothing was written."""

    exit_code = 1


def docs_tables_command(
    files: list[Path], check: bool, keep: list[Path], into: Path, console: Console
) -> None:
    """Each run of `keep` copied under `into`, then each markdown file's tables written
    (or, with `check`, compared: TablesDiffer naming each that differs)."""
    if not files and not keep:
        raise HarnessError("docs-tables: name markdown files (their tables) or --keep RUN_DIR")
    for run in keep:
        kept = keep_run(run, into)
        console.print(f"Kept: {kept} ({len(list(kept.iterdir()))} files)", highlight=False)
    stale: list[str] = []
    for path in files:
        if not path.is_file():
            raise HarnessError(f"{path}: no such markdown file")
        text, changed = refreshed(path)
        if check:
            stale += [f"{path}: {block}" for block in changed]
            continue
        if changed:
            path.write_text(text)
        console.print(f"{path}: {_tables(len(changed))} written anew", highlight=False)
    if stale:
        raise TablesDiffer(
            f"{_tables(len(stale))} not as their run folders give them ({'; '.join(stale)}): "
            "harness docs-tables FILE writes them"
        )
    if check:
        console.print(f"Every table of {len(files)} file(s) as its run folders give it.")


def keep_run(run: Path, into: Path) -> Path:
    """KEPT's files of the run folder `run` copied to `into`/<scenario>/<run id>/; a
    folder there already is left as it is where it holds the same files, refused where
    it holds others (never written over)."""
    if not (run / "run.json").is_file():
        raise HarnessError(f"{run}: not a run folder (no run.json)")
    document = load_document(run)
    if document.status != "complete":
        raise HarnessError(f"{run}: its run is {document.status}; only a complete run is kept")
    names = [name for name in KEPT if (run / name).is_file()]
    target = into / document.scenario.name / document.run_id
    if target.exists():
        same = sorted(path.name for path in target.iterdir()) == sorted(names) and all(
            filecmp.cmp(run / name, target / name, shallow=False) for name in names
        )
        if not same:
            raise HarnessError(
                f"{target}: already holds another copy of run {document.run_id}; "
                "remove it to keep this one"
            )
        return target
    target.mkdir(parents=True)
    for name in names:
        shutil.copy2(run / name, target / name)
    return target


def _tables(count: int) -> str:
    return f"{count} table" if count == 1 else f"{count} tables"
