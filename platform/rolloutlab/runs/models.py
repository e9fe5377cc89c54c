"""Projects, experiments and runs, and the record of every state a run went through."""

from django.conf import settings
from django.db import models


class Project(models.Model):
    """A team's project: who may see it is who belongs to its team (rolloutlab.runs.access)."""

    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="projects")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="projects")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="project_name_per_team")]

    def __str__(self):
        return self.name


class Experiment(models.Model):
    """A set of runs launched together, e.g. a sweep of methods x seeds."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="experiments")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="experiments")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name


class Tag(models.Model):
    name = models.CharField(max_length=50, unique=True)

    def __str__(self):
        return self.name


class State(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"


FINAL_STATES = (State.SUCCEEDED, State.FAILED, State.CANCELLED, State.LOST)
# the final states a user may resume a trainer run from (rolloutlab.execution.services.resume_run)
RESUMABLE_STATES = (State.FAILED, State.CANCELLED, State.LOST)

# queued -> running -> succeeded | failed | cancelled, and lost when the worker stops heartbeating
ALLOWED_TRANSITIONS = {
    State.QUEUED: {State.RUNNING, State.CANCELLED, State.FAILED},
    State.RUNNING: {State.SUCCEEDED, State.FAILED, State.CANCELLED, State.LOST},
}
# A trainer run also goes back to the queue, to resume from its last checkpoint in a new attempt: on its
# own when its worker stops heartbeating (running -> queued, while it has attempts left; then lost), and
# when a user resumes it after it failed, was cancelled or was lost.
TRAINER_TRANSITIONS = {
    **ALLOWED_TRANSITIONS,
    State.RUNNING: ALLOWED_TRANSITIONS[State.RUNNING] | {State.QUEUED},
    **{state: {State.QUEUED} for state in RESUMABLE_STATES},
}
# An external run is lost when its client stops reporting, which may be the network's fault: its
# client keeps what it could not send, and the run is running again when the reports come back.
EXTERNAL_TRANSITIONS = {
    **ALLOWED_TRANSITIONS,
    State.LOST: {State.RUNNING, State.SUCCEEDED, State.FAILED, State.CANCELLED},
}


class Kind(models.TextChoices):
    TRAINER = "trainer"  # launched here, executed by a worker's trainer
    EXTERNAL = "external"  # a script's own training loop, reporting through rolloutlab_client.client


TRANSITIONS = {Kind.TRAINER: TRAINER_TRANSITIONS, Kind.EXTERNAL: EXTERNAL_TRANSITIONS}


class Run(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    experiment = models.ForeignKey(Experiment, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    name = models.CharField(max_length=200)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="runs")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns")
    tags = models.ManyToManyField(Tag, blank=True, related_name="runs")

    config = models.JSONField(help_text="The resolved RunConfig")
    config_hash = models.CharField(max_length=64, db_index=True)
    method = models.CharField(max_length=50, blank=True, db_index=True)
    task = models.CharField(max_length=50, blank=True)
    seed = models.IntegerField(default=0)

    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TRAINER)
    client_key = models.CharField(max_length=64, null=True, blank=True, help_text="An external run's key at its client")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    detail = models.TextField(blank=True, help_text="The cause of the latest transition")
    cancel_requested = models.BooleanField(default=False)

    queue = models.CharField(max_length=20, default="cpu")
    celery_task_id = models.CharField(max_length=64, blank=True)
    worker_host = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The number of the attempt that holds the run (RunAttempt.number; 0 before the first claim). A worker
    # writes for the run only while this is its attempt's number: a newer attempt fences the older out.
    attempt = models.IntegerField(default=0)
    requeues = models.IntegerField(
        default=0, help_text="Automatic re-queues after a lost worker since the launch or the last resume by a user"
    )

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    step = models.IntegerField(default=0, help_text="The last step reported")
    total_steps = models.IntegerField(default=0)
    train_seconds = models.FloatField(default=0.0, help_text="counters/wall_s at the last step")
    summary = models.JSONField(default=dict, blank=True, help_text="The latest value of every metric")
    unverified = models.BooleanField(
        default=False,
        help_text="Imported from a bundle that no trusted key signed, and not yet reproduced by Verify",
    )
    # the runs table's own fields: a researcher's notes, and archived runs left out of the list by default
    notes = models.TextField(blank=True)
    archived = models.BooleanField(default=False, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "client_key"], condition=models.Q(client_key__isnull=False),
                                    name="run_client_key_per_owner"),
        ]  # fmt: skip

    def __str__(self):
        return f"{self.name} ({self.state})"

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def environment(self) -> str:
        """The environment its episodes ran in; "none" for single-turn runs (and configs stored before there were
        environments, or an external run's config that names none)."""
        section = (self.config or {}).get("environment") if isinstance(self.config, dict) else None
        name = section.get("name") if isinstance(section, dict) else None
        return name if isinstance(name, str) and name else "none"


class Transition(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="transitions")
    from_state = models.CharField(max_length=10, blank=True)
    to_state = models.CharField(max_length=10)
    at = models.DateTimeField(auto_now_add=True)
    cause = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "id"]


class Outcome(models.TextChoices):
    """How an attempt ended: the state its run went to, and `lost` when its worker stopped heartbeating
    (whether the run went back to the queue or was lost for good)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"


class RunAttempt(models.Model):
    """One worker's go at a trainer run: opened when the worker claims the run, closed with the run's next state."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    number = models.IntegerField(help_text="1, 2, ... in the order the attempts claimed the run")
    worker_host = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True, help_text="Blank while it runs")
    reason = models.TextField(blank=True, help_text="The cause its run's state changed for")
    resumed_from_step = models.IntegerField(
        null=True,
        blank=True,
        help_text="The checkpoint's step it resumed from; 0: it started over; none: not known yet",
    )

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="attempt_number_per_run")]

    def __str__(self):
        return f"attempt {self.number} of run {self.run_id} ({self.outcome or 'running'})"


class LogLine(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="log_lines")
    at = models.DateTimeField(auto_now_add=True)
    text = models.TextField()

    class Meta:
        ordering = ["id"]


class Artifact(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="artifacts")
    kind = models.CharField(max_length=30)
    path = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]


class Sample(models.Model):
    """One rollout sample: prompt, completion, rewards, advantage and what each stage did."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="samples")
    step = models.IntegerField()
    data = models.JSONField()
    client_key = models.CharField(max_length=64, null=True, blank=True, help_text="Its key at an external client")

    class Meta:
        ordering = ["step", "id"]
        indexes = [models.Index(fields=["run", "step"])]
        constraints = [
            # a batch of samples sent again after a lost answer is stored once
            models.UniqueConstraint(fields=["run", "client_key"], condition=models.Q(client_key__isnull=False),
                                    name="sample_client_key_per_run"),
        ]  # fmt: skip


# ---------------------------------------------------------------- the runs table's saved views


class SavedView(models.Model):
    """A user's named choice of the runs table's columns, per project (None: the list over all projects).

    The one most recently used is the one the list opens with.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=50)
    columns = models.JSONField(default=list, help_text="Column keys: config:<knob>, metric:<name>, duration, ...")
    used_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-used_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "project", "name"], name="saved_view_name_per_project"),
            # NULL is distinct from NULL in a unique index: the all-projects views need their own
            models.UniqueConstraint(fields=["user", "name"], condition=models.Q(project__isnull=True),
                                    name="saved_view_name_all_projects"),
        ]  # fmt: skip

    def __str__(self):
        return self.name
