"""The execution side: from a queued run to a finished one.

Launch, cancel, resume and rerun (services), the launch form (forms), the deployment's ceilings (limits)
and data roots (data_paths), handing a run to a worker (dispatch, the Celery task in tasks), running it
(executor, reporter), its state machine and the signals other apps listen to (lifecycle), resuming from a
checkpoint (resume), the monitor that re-sends lost wake-ups and marks lost runs (monitor), and runs a
script reports from outside (external). A plain package, not a Django app: it holds no models, and its
Celery tasks are found through rolloutlab.celery.
"""
