"""Loaded by the outage tests' Celery worker (`celery worker --include tests.support.fault_tap`).

The trainer reports a NaN and infinities at a few steps, as a diverging loss would,
and every step's reported metric names are appended to $FAULT_TAP, so a test
counts what was reported without asking the database it is checking. While a file
$FAULT_TAP.hold exists, steps wait: a test opens its browser on the run first.
"""

import json
import math
import os
import time

from workers.training.loop import SynchronousLoop

NONFINITE = {3: ("policy/loss", math.nan), 4: ("reward/mean", math.inf), 5: ("policy/loss", -math.inf)}
_train_step = SynchronousLoop.step


def step(self, number: int) -> dict[str, float]:
    hold, waited = os.environ["FAULT_TAP"] + ".hold", 0.0
    while os.path.exists(hold) and waited < 120:  # a test holds the run until its browser is watching
        time.sleep(0.1)
        waited += 0.1
    metrics = _train_step(self, number)
    if number in NONFINITE:
        name, value = NONFINITE[number]
        metrics[name] = value
    with open(os.environ["FAULT_TAP"], "a") as tap:
        tap.write(json.dumps({"step": number, "names": sorted(metrics)}) + "\n")
    return metrics


SynchronousLoop.step = step
