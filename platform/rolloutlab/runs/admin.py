from django.contrib import admin

from rolloutlab.runs.models import Artifact, Experiment, Project, Run, RunAttempt, Tag, Transition


class TransitionInline(admin.TabularInline):
    model = Transition
    extra = 0
    readonly_fields = ("from_state", "to_state", "at", "cause")


class AttemptInline(admin.TabularInline):
    model = RunAttempt
    extra = 0
    readonly_fields = ("number", "worker_host", "started_at", "ended_at", "outcome", "reason", "resumed_from_step")


class ArtifactInline(admin.TabularInline):
    model = Artifact
    extra = 0
    readonly_fields = ("kind", "path", "sha256", "created_at")


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "project", "method", "seed", "state", "step", "owner", "created_at")
    list_filter = ("state", "method", "project")
    search_fields = ("name", "config_hash")
    readonly_fields = ("config_hash", "celery_task_id", "worker_host", "heartbeat_at", "attempt", "started_at",
                       "finished_at")  # fmt: skip
    inlines = [TransitionInline, AttemptInline, ArtifactInline]


admin.site.register(Project)
admin.site.register(Experiment)
admin.site.register(Tag)
