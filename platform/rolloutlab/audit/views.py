"""The audit page of a run, the differences of two runs, verify, and bundle import (their JSON: audit.api)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from rolloutlab.accounts.access import Action, home_team
from rolloutlab.audit import services
from rolloutlab.audit.models import AuditRecord, Verification
from rolloutlab.audit.uploads import bundle_upload
from rolloutlab.inputs import ProjectName, RunPair, Strict, UserInputError, page_inputs
from rolloutlab.runs.access import get_run_for_user, project_for_launch, visible_runs
from workers.bundle import BundleError


@login_required
@require_GET
def audit_page(request, run_id: int):
    """Reads only: a verification is compared by the worker when its rerun ends."""
    run = get_run_for_user(request.user, run_id)
    record = services.record_of(run)
    audit = AuditRecord.objects.filter(run=run).only("provenance", "imported_from").first()
    context = {
        "provenance": audit.provenance if audit else "",
        "imported_from": audit.imported_from if audit else "",
        "run": run,
        "record": record,
        "record_json": json.dumps(record, indent=1, sort_keys=True),
        "packages": sorted(record.get("packages", {}).items()),
        "artifacts": run.artifacts.all(),
        "verifications": Verification.objects.filter(original=run).select_related("rerun"),
        "verifies": Verification.objects.filter(rerun=run).select_related("original").first(),
        "others": visible_runs(request.user).exclude(id=run.id).order_by("-id")[:100],
    }
    return render(request, "audit/audit.html", context)


@login_required
@require_GET
@page_inputs(RunPair)
def differences(request, query: RunPair):
    a, b = get_run_for_user(request.user, query.a), get_run_for_user(request.user, query.b)
    missing = services.unrecorded(a, b)
    if missing:  # a queued run has no record: "everything differs" would only say that
        return render(request, "audit/differences.html", {"a": a, "b": b, "missing": missing})
    diff = services.differences(a, b)
    context = {"a": a, "b": b, "diff": diff, "same": not any(diff.values())}
    return render(request, "audit/differences.html", context)


@login_required
@require_POST
def verify(request, run_id: int):
    run = get_run_for_user(request.user, run_id, Action.CHANGE)
    try:
        verification = services.verify(run, request.user)
    except ValueError as exc:
        messages.warning(request, str(exc))
        return redirect("audit:page", run_id=run.id)
    messages.info(request, f"Verifying: rerun #{verification.rerun_id} will be compared with this run when it ends.")
    return redirect("audit:page", run_id=run.id)


class ImportForm(Strict):
    project: ProjectName = "imported"


@login_required
@require_http_methods(["GET", "POST"])
def import_page(request):
    if request.method != "POST":
        return render(request, "audit/import.html", {})
    home_team(request.user)  # viewers may not import: 403 before the upload is read
    try:
        upload = bundle_upload(request)  # capped at BUNDLE_MAX_BYTES before and while it is read
        form = ImportForm.model_validate({"project": request.POST.get("project") or "imported"})
        if upload is None:
            raise BundleError("bundle: choose a bundle file to import")
        with upload:
            run = services.import_bundle(upload, request.user, project_for_launch(request.user, form.project))
    except (BundleError, UserInputError) as exc:
        return render(request, "audit/import.html", {"error": str(exc)}, status=getattr(exc, "status", 400))
    except ValueError as exc:  # pydantic's ValidationError
        return render(request, "audit/import.html", {"error": f"project: {exc}"}, status=400)
    return redirect("audit:page", run_id=run.id)
