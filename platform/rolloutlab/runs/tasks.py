"""Celery tasks: they take ids and call the executor."""

from celery import shared_task


@shared_task(name="runs.execute_run", acks_late=True)
def execute_run(run_id: int) -> str:
    from rolloutlab.runs.executor import execute

    return execute(run_id)
