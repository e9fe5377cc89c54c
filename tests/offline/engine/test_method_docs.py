"""docs/methods/README.md: its two tables are the ones the code writes — the presets (workers/config/presets.py)
and "How each method was checked" (workers/pipeline/catalog.py, from each component's declaration), a row for
every component, each citing its card's line.

A row says whether the component is its paper's form or a documented choice, and quotes the line of the card
(or of the README) that says so, as `card.md:LINE` and the quoted words. The quote must stand on that line: a card
edited under the table shows up here, not in a reader's confusion.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workers.cli import write_tables
from workers.config.presets import METHODS as PRESETS
from workers.config.presets import TABLE_HEADER, methods_table
from workers.doc_tables import REAL_MODEL_VERDICTS, real_model_verdict, replace_table
from workers.pipeline import STAGES
from workers.pipeline.catalog import checked_table

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


def test_the_readme_holds_the_tables_that_the_presets_and_the_declarations_write(tmp_path):
    """A preset or a component added shows in the README when `methods --write-table` is run, and only then."""
    readme = (METHODS / "README.md").read_text()
    assert methods_table(METHODS) in readme, "run: python -m workers methods --write-table docs/methods/README.md"
    assert checked_table(METHODS) in readme, "run: python -m workers methods --write-table docs/methods/README.md"
    assert all(f"| `{name}` | [{name}.md]({name}.md) |" in methods_table(METHODS) for name in PRESETS)
    copy = tmp_path / "README.md"
    copy.write_text(readme)
    write_tables(copy, cards=METHODS)  # what the command writes is what is there: nothing changes
    assert copy.read_text() == readme


def test_writing_a_table_replaces_the_old_one_and_leaves_the_rest(tmp_path):
    readme = tmp_path / "README.md"
    table = methods_table(METHODS)
    readme.write_text("# Cards\n\n" + TABLE_HEADER + "| `old` | x | y | z |\n\n## Next\n")
    replace_table(readme, table)
    assert readme.read_text() == "# Cards\n\n" + table + "\n## Next\n"
    readme.write_text(readme.read_text() + "\n" + table.replace("the reference", "old"))  # at the end
    replace_table(readme, table)
    assert readme.read_text().count("the reference") == 1


def test_the_real_model_column_is_what_each_card_says_and_a_verdict_outside_the_list_is_refused(tmp_path):
    """Issue 33: the summary's "real model" column is each card's own verdict line, so the two cannot disagree."""
    for verdict in REAL_MODEL_VERDICTS:
        (tmp_path / "dapo.md").write_text(f"# dapo\n\n## On a real model\n\nOn a real model: **{verdict}** (5 seeds)\n")
        row = next(line for line in methods_table(tmp_path).splitlines() if line.startswith("| `dapo`"))
        assert row.endswith(f"| {verdict} |")
    assert real_model_verdict(tmp_path / "rloo.md") == "—"  # no card (or no section): a method the sweep leaves out
    (tmp_path / "dapo.md").write_text("On a real model: **better**\n")
    with pytest.raises(ValueError, match="dapo.md: one 'On a real model"):
        methods_table(tmp_path)
    (tmp_path / "dapo.md").write_text("On a real model: **level**\n\nOn a real model: **not shown**\n")
    with pytest.raises(ValueError, match="dapo.md"):
        real_model_verdict(tmp_path / "dapo.md")
    assert real_model_verdict(METHODS / "grpo.md") == "the base"


def test_a_checked_row_cites_the_line_its_quote_stands_on_and_a_lost_quote_is_an_error(tmp_path):
    (tmp_path / "grpo.md").write_text("# grpo\n\nG completions are sampled (`generate: iid`) per prompt\n")
    for name in STAGES["generate"].names():
        if name == "iid":
            continue
        checked = STAGES["generate"].declaration(name).checked
        (tmp_path / checked.card).write_text(checked.quote + "\n")
    table = checked_table_of_stage(tmp_path, "generate")
    assert "`grpo.md:3` “G completions are sampled (`generate: iid`)”" in table
    (tmp_path / "grpo.md").write_text("# grpo, the quote gone\n")
    with pytest.raises(LookupError, match="grpo.md has no line holding"):
        checked_table_of_stage(tmp_path, "generate")


def checked_table_of_stage(cards, stage: str) -> str:
    from workers.pipeline import catalog

    registry = STAGES[stage]
    return "".join(catalog.row(cards, f"{stage}: {n}", registry.declaration(n).checked) for n in registry.names())
