"""The audit page of a run, the differences of two runs, verify, and bundles out and in."""

from __future__ import annotations

import io
import json

import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from rolloutlab.accounts.auth import api_login_required
from rolloutlab.audit import services
from rolloutlab.audit.models import Verification
from rolloutlab.runs.api import run_json
from rolloutlab.runs.models import Run
from workers.bundle import BundleError

MAX_BUNDLE_BYTES = 512 * 2**20


@login_required
@require_GET
def audit_page(request, run_id: int):
    run = get_object_or_404(Run.objects.select_related("project", "owner"), id=run_id)
    for verification in run.verifications.all():
        services.complete_verification(verification.rerun_id)
    record = services.record_of(run)
    context = {
        "run": run,
        "record": record,
        "record_json": json.dumps(record, indent=1, sort_keys=True),
        "packages": sorted(record.get("packages", {}).items()),
        "artifacts": run.artifacts.all(),
        "verifications": Verification.objects.filter(original=run).select_related("rerun"),
        "verifies": Verification.objects.filter(rerun=run).select_related("original").first(),
        "others": Run.objects.exclude(id=run.id).order_by("-id")[:100],
    }
    return render(request, "audit/audit.html", context)


@login_required
@require_GET
def differences(request):
    ids = [request.GET.get("a", ""), request.GET.get("b", "")]
    if not all(i.isdigit() for i in ids):
        return render(request, "audit/differences.html", {"error": "pick two runs: ?a=<id>&b=<id>"}, status=400)
    a, b = (get_object_or_404(Run, id=int(i)) for i in ids)
    diff = services.differences(a, b)
    context = {"a": a, "b": b, "diff": diff, "same": not any(diff.values())}
    return render(request, "audit/differences.html", context)


@login_required
@require_POST
def verify(request, run_id: int):
    run = get_object_or_404(Run, id=run_id)
    try:
        verification = services.verify(run, request.user)
    except ValueError as exc:
        messages.warning(request, str(exc))
        return redirect("audit:page", run_id=run.id)
    messages.info(request, f"Verifying: rerun #{verification.rerun_id} will be compared with this run when it ends.")
    return redirect("audit:page", run_id=run.id)


@require_GET
@api_login_required
def bundle(request, run_id: int):
    run = get_object_or_404(Run, id=run_id)
    buffer = io.BytesIO()
    seal = services.export_bundle(run, buffer)
    response = HttpResponse(buffer.getvalue(), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="run-{run.id}-{seal[:12]}.zip"'
    response["X-Bundle-Sha256"] = seal
    return response


@login_required
def import_page(request):
    if request.method == "POST":
        upload = request.FILES.get("bundle")
        try:
            if upload is None:
                raise BundleError("bundle: choose a bundle file to import")
            run = services.import_bundle(upload.read(), request.user, request.POST.get("project", "imported"))
            return redirect("audit:page", run_id=run.id)
        except BundleError as exc:
            return render(request, "audit/import.html", {"error": str(exc)}, status=400)
    return render(request, "audit/import.html", {})


@require_POST
@api_login_required
def import_api(request):
    """POST the bundle's bytes (application/zip) or a multipart form with a `bundle` file."""
    data = request.FILES["bundle"].read() if "bundle" in request.FILES else request.body
    if len(data) > MAX_BUNDLE_BYTES:
        return JsonResponse({"error": "the bundle is larger than 512 MB"}, status=413)
    try:
        run = services.import_bundle(data, request.user, request.GET.get("project", "imported"))
    except BundleError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse(run_json(run), status=201)


@require_POST
@api_login_required
def verify_api(request, run_id: int):
    try:
        verification = services.verify(get_object_or_404(Run, id=run_id), request.user)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=409)
    return JsonResponse({"verification": verification.id, "rerun": verification.rerun_id}, status=201)


@require_GET
@api_login_required
def audit_api(request, run_id: int):
    run = get_object_or_404(Run, id=run_id)
    verifications = []
    for verification in Verification.objects.filter(original=run):
        verification = services.complete_verification(verification.rerun_id)
        verifications.append({"rerun": verification.rerun_id, "result": verification.result,
                              "verdict": verification.verdict})  # fmt: skip
    return JsonResponse({"run": run.id, "record": services.record_of(run), "verifications": verifications,
                         "config_yaml": yaml.safe_dump(run.config, sort_keys=False)})  # fmt: skip


@require_GET
@api_login_required
def differences_api(request):
    ids = [request.GET.get("a", ""), request.GET.get("b", "")]
    if not all(i.isdigit() for i in ids):
        return JsonResponse({"error": "a and b: two run ids"}, status=400)
    a, b = (get_object_or_404(Run, id=int(i)) for i in ids)
    return JsonResponse({"a": a.id, "b": b.id, "differences": services.differences(a, b)})
