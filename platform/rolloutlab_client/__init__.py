"""Rollout Lab's client SDK: what a training script you run yourself imports to report into a run.

    import rolloutlab_client.client as rl                           # metrics, samples, the end (docs/client.md)
    from rolloutlab_client.integrations.trl import RolloutLabCallback  # a TRL GRPOTrainer's run

It lives outside the Django package on purpose: it imports neither Django nor Celery (only requests and
pydantic; the TRL bridge adds transformers), so any script can use it without the platform's settings.
`wire` is the format both sides validate with: the platform's API imports it from here.
"""
