"""Stored run configs in the shape of kind-owned task, model and resources knobs.

Configs stored before each task kind, model kind and executor owned its knobs carried every knob
of these sections (`task: {name: jsonl, digits: 1, ...}`, `resources: {executor: local,
rollout_actors: 2, ...}`); validating one now would reject the knobs its kind does not have. Each
trainer run's config is upgraded by workers.config.upgrade with history=True: a knob its kind does
not have is dropped. At its old default that changes nothing, not even the hash; set to anything
else, it was inert (the run never read it) and is dropped too, since refusing a run that already
ran helps no one. `config_hash` is left as it was: the identity of the launch. An external run's
config is its script's own JSON, not a RunConfig, and is left alone.
"""

from django.db import migrations

from workers.config import upgrade


def forwards(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    for run in Run.objects.filter(kind="trainer").only("id", "config").iterator():
        if not isinstance(run.config, dict):
            continue
        new = upgrade(run.config, history=True)
        if new != run.config:
            Run.objects.filter(id=run.id).update(config=new)


class Migration(migrations.Migration):
    dependencies = [("runs", "0008_alter_runattempt_resumed_from_step")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
