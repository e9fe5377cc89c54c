"""Tables of the docs that the code writes: a markdown table found by its header, replaced whole.

docs/methods/README.md holds two: the presets (workers/config/presets.py, `methods_table`, with each card's verdict
on a real model) and how each component was checked against its paper (workers/pipeline/catalog.py,
`checked_table`). Both are written by
`python -m workers methods --write-table docs/methods/README.md`, and tests/offline/engine/test_method_docs.py
fails while the README holds anything else.
"""

from __future__ import annotations

import re
from pathlib import Path

# What a card's "On a real model" section says its sweep on SmolLM2 (examples/sweep_real_model.py) showed, on a line
# of its own: `On a real model: **level**`. The rule that reads it from the runs (docs/methods/README.md states it) is
# examples/real_model_card.py's `verdict`, and tests/offline/engine/test_sweeps.py holds each card's line to it;
# "the base": the run every card is measured against.
REAL_MODEL_VERDICTS = ("effect shown", "level", "not shown", "not yet measured", "the base")
VERDICT_LINE = re.compile(r"^On a real model: \*\*(?P<verdict>[^*]+)\*\*", re.MULTILINE)


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


def real_model_verdict(card: Path) -> str:
    """The verdict line of a card's real-model section; "—" for a card with none (a method the sweep does not
    cover). A verdict outside REAL_MODEL_VERDICTS, or two of them, is an error naming the card."""
    found = VERDICT_LINE.findall(card.read_text()) if card.is_file() else []
    if len(found) > 1 or any(v not in REAL_MODEL_VERDICTS for v in found):
        raise ValueError(f"{card.name}: one 'On a real model: **...**' line, one of {', '.join(REAL_MODEL_VERDICTS)}")
    return found[0] if found else "—"
