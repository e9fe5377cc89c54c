"""Old configs in today's shape: `upgrade(raw)` for a config written when every kind carried every knob.

Before each task, model and executor kind owned its knobs, a config's task, model and resources
sections held every knob of the section (workers/config/legacy.py), most of them inert for the
kind chosen: a jsonl task's `digits`, a directory model's `hidden_size`, a local run's
`rollout_actors`. Today's schema refuses a knob its kind does not have, so an old config is
upgraded before it is validated:

- a knob its kind does not have, at its old default, is dropped: it changed nothing, and the
  hash takes it back from the frozen table, so the config hashes as it did;
- one set to anything else is refused, a ConfigError naming the field: its author asked for
  something the run would silently not do (4 rollout actors for a local run), and a message
  saying so beats a run that ignores it. A stored run's config, which already ran without it,
  is upgraded with `history=True` instead: the knob is dropped and the run keeps its recorded hash.

Everything else (an unknown kind, a key no kind ever had) is left for validation to report.

    raw = upgrade(yaml.safe_load(open("old-run.yaml")))   # then resolve(raw)
"""

from __future__ import annotations

import copy
from typing import Any

from workers.config.legacy import FLAT_DEFAULTS
from workers.config.schema import SECTION_KINDS, kind_of, several_machines_need_ray
from workers.errors import ConfigError

# a refusal an old validator already worded, kept in its words and under its field
EXPLAINED = {("resources", "nodes"): ("resources.executor", several_machines_need_ray)}


def upgrade(raw: dict[str, Any], *, history: bool = False) -> dict[str, Any]:
    """`raw` with the knobs its task, model and resources kinds do not have taken out (see the module)."""
    upgraded, refused = copy.deepcopy(raw), {}
    for section, flat in FLAT_DEFAULTS.items():
        given = upgraded.get(section)
        if not isinstance(given, dict):
            continue
        kind = kind_of(section, given)
        owned = SECTION_KINDS[section].get(kind)
        if owned is None:
            continue  # an unknown kind: validation names it
        for knob in [k for k in given if k in flat and k not in owned.model_fields]:
            value = given.pop(knob)
            if value != flat[knob] and not history:
                refused.update([_refusal(section, kind, knob, value)])
    if refused:
        raise ConfigError("\n".join(f"{where}: {text}" for where, text in refused.items()), refused)
    return upgraded


def _refusal(section: str, kind: str, knob: str, value: Any) -> tuple[str, str]:
    """(field, message) for a knob set on a kind that never read it."""
    if (section, knob) in EXPLAINED:
        where, explain = EXPLAINED[section, knob]
        return where, explain(kind, value)
    owners = [name for name, model in SECTION_KINDS[section].items() if knob in model.model_fields]
    verb = "has" if len(owners) == 1 else "have"
    named = " and ".join([", ".join(owners[:-1]), owners[-1]] if len(owners) > 1 else owners)
    return (
        f"{section}.{knob}",
        f"{section} '{kind}' has no knob {knob}, and this config sets it to {value!r}: only {named} {verb} it",
    )
