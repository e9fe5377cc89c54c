"""docs/methods/README.md: the table of presets is the one workers/config/presets.py writes; "How each method was
checked" has a row for every component, each citing its card's line.

A row says whether the component is its paper's form or a documented choice, and quotes the line of the card
(or of the README) that says so, as `card.md:LINE` and the quoted words. The quote must stand on that line: a card
edited under the table shows up here, not in a reader's confusion.
"""

from __future__ import annotations

import re
from pathlib import Path

from workers.config.presets import METHODS as PRESETS
from workers.config.presets import methods_table, write_methods_table
from workers.pipeline import STAGES

METHODS = Path(__file__).resolve().parents[3] / "docs" / "methods"
ROW = re.compile(r"^\| `?(?P<component>[^|`]+?)`? \|.*\| `(?P<card>[\w.-]+\.md):(?P<line>\d+)` “(?P<quote>.+)” \|$")


def checked_rows() -> list[re.Match]:
    text = (METHODS / "README.md").read_text()
    section = text.split("## How each method was checked", 1)[1].split("\n## ", 1)[0]
    return [m for line in section.splitlines() if (m := ROW.match(line))]


def test_every_component_has_a_row():
    declared = {f"{stage}: {name}" for stage, registry in STAGES.items() for name in registry.names()}
    listed = {m["component"] for m in checked_rows()}
    assert declared <= listed, f"components without a row: {sorted(declared - listed)}"


def test_every_row_quotes_the_line_it_cites():
    rows = checked_rows()
    assert len(rows) >= 36
    for m in rows:
        lines = (METHODS / m["card"]).read_text().splitlines()
        line = int(m["line"])
        assert 1 <= line <= len(lines) and m["quote"] in lines[line - 1], (m["component"], m["card"], line)


def test_the_readme_holds_the_table_of_presets_that_the_presets_write():
    """A preset added to presets.py shows in the README when `methods --write-table` is run, and only then."""
    assert methods_table() in (METHODS / "README.md").read_text(), "run: python -m workers methods --write-table ..."
    assert all(f"| `{name}` | [{name}.md]({name}.md) |" in methods_table() for name in PRESETS)


def test_writing_the_table_replaces_the_old_one_and_leaves_the_rest(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# Cards\n\n| method | card | changes |\n| --- | --- | --- |\n| `old` | x | y |\n\n## Next\n")
    write_methods_table(readme)
    assert readme.read_text() == "# Cards\n\n" + methods_table() + "\n## Next\n"
