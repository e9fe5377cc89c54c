"""Tables of the docs that the code writes: a markdown table found by its header, replaced whole.

docs/methods/README.md holds two: the presets (workers/config/presets.py, `methods_table`) and how each
component was checked against its paper (workers/pipeline/catalog.py, `checked_table`). Both are written by
`python -m workers methods --write-table docs/methods/README.md`, and tests/offline/engine/test_method_docs.py
fails while the README holds anything else.
"""

from __future__ import annotations

from pathlib import Path


def header_of(table: str) -> str:
    """A table's first two lines (the column names and the rule), by which it is found in a file."""
    return "".join(table.splitlines(keepends=True)[:2])


def replace_table(path: Path, table: str) -> None:
    """Replace, in the file at `path`, the table that starts with `table`'s header (to a blank line or the end)."""
    text = path.read_text()
    start = text.index(header_of(table))
    blank = text.find("\n\n", start)
    end = len(text) if blank < 0 else blank + 1
    path.write_text(text[:start] + table + text[end:])
