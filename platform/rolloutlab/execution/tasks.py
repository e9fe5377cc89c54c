"""Celery tasks: they take ids and call the executor. The web side sends them by name (execution.dispatch).

Workers run prefork with one task per child (compose.yaml): a run owns its process. The
parent preloads the slow imports once, so that each child it forks starts a run at once.
A run's task carries soft and hard time limits from its wall time (execution.dispatch); the
executor turns the soft one (SoftTimeLimitExceeded) into a failed run.
"""

from celery import shared_task
from celery.signals import worker_init

from rolloutlab.execution.executor import execute
from workers.models.policy import preload


@worker_init.connect
def preload_in_the_parent(**kwargs):
    preload()


@shared_task(name="runs.execute_run", acks_late=True, bind=True)
def execute_run(self, run_id: int) -> str:
    return execute(run_id, token=self.request.id)  # only the run's latest wake-up may start it
