"""docs/methods/README.md's "How each method was checked", one row per component, from its declaration.

Each component folder declares how it was checked against its paper (`checked=Checked(...)` in its
`COMPONENT`); the row cites the line of the card that says so, found here by the quoted words, so a card
edited above the line moves the citation with it, and a quote no longer on any line of its card is an error.
"""

from __future__ import annotations

from pathlib import Path

from workers.pipeline import STAGES
from workers.registry import Checked

HEADER = (
    "| component | preset(s) | paper | how it was checked | the card's line that says it |\n"
    "| --- | --- | --- | --- | --- |\n"
)


def card_line(cards: Path, checked: Checked) -> int:
    """The first line of the card holding the quote (1-based)."""
    lines = (cards / checked.card).read_text().splitlines()
    for number, line in enumerate(lines, start=1):
        if checked.quote in line:
            return number
    raise LookupError(f"{checked.card} has no line holding “{checked.quote}”")


def row(cards: Path, component: str, checked: Checked) -> str:
    citation = f"`{checked.card}:{card_line(cards, checked)}` “{checked.quote}”"
    return f"| `{component}` | {checked.presets} | {checked.paper} | {checked.how} | {citation} |\n"


def checked_table(cards: Path) -> str:
    """The table, stage by stage in the order of a step, each stage's components by name."""
    rows = []
    for stage, registry in STAGES.items():
        for name in registry.names():
            checked = registry.declaration(name).checked
            if checked is None:
                raise LookupError(f"{stage}: {name} declares no checked=Checked(...): how was it checked?")
            rows.append(row(cards, f"{stage}: {name}", checked))
    return HEADER + "".join(rows)
