"""Stored run configs in the shape of component-owned knobs.

Configs stored before each pipeline component owned its knobs carried every knob of
every stage (`filter: {name: none, max_rounds: 4}`); validating one now would reject
the knobs the chosen component does not have. This keeps, per stage, only the chosen
component's knobs (as they were owned when this migration was written), and gives an
old dynamic-sampling filter the signal it used then (`reward`), so a rerun of an old
run behaves as it did. `config_hash` is left as it was: the identity of the launch.
"""

from django.db import migrations

OWNED = {
    "generate": {"iid": set(), "pivot": set()},
    "filter": {"none": {"overlong"}, "dynamic-sampling": {"overlong", "max_rounds", "signal"}},
    "control": {"fixed": set()},
    "replay": {"none": set()},
    "advantage": dict.fromkeys(("group-mean", "group-median", "leave-one-out"), {"scale", "eps", "rescale_nonzero"}),
    "objective": dict.fromkeys(
        ("token-clip", "sequence-clip"),
        {"clip_low", "clip_high", "aggregation", "kl_coef", "entropy_coef", "old_logprobs"},
    ),
}


def owned_only(config: dict) -> dict:
    config = dict(config)
    for stage, components in OWNED.items():
        section = config.get(stage)
        if not isinstance(section, dict) or section.get("name") not in components:
            continue
        name = section["name"]
        kept = {k: v for k, v in section.items() if k == "name" or k in components[name]}
        if name == "dynamic-sampling" and "signal" not in section:
            kept["signal"] = "reward"
        config[stage] = kept
    return config


def forwards(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    for run in Run.objects.only("id", "config").iterator():
        new = owned_only(run.config or {})
        if new != run.config:
            Run.objects.filter(id=run.id).update(config=new)


class Migration(migrations.Migration):
    dependencies = [("runs", "0001_initial")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
