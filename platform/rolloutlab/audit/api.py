"""The audit part of the JSON API: records, differences, verify, and bundles out and in."""

from __future__ import annotations

import io
from typing import Any

import yaml
from django.http import HttpResponse
from ninja import Query, Router, Status
from pydantic import Field

from rolloutlab.accounts.access import Action
from rolloutlab.accounts.auth import READERS
from rolloutlab.audit import services
from rolloutlab.audit.models import Verification
from rolloutlab.audit.uploads import bundle_upload
from rolloutlab.inputs import ProjectName, RunId, RunPair, Strict, UserInputError, answers, file_response
from rolloutlab.runs.access import get_run_for_user, project_for_launch
from rolloutlab.runs.serializers import run_json

router = Router(tags=["audit"])


class ImportQuery(Strict):
    project: ProjectName = Field("imported", description="The project of yours the run goes to")


@router.get(
    "/runs/{int:run_id}/bundle", auth=READERS, response=answers({200: bytes}), summary="The run's sealed bundle (zip)",
    openapi_extra=file_response("application/zip"),
)  # fmt: skip
def bundle(request, run_id: RunId):
    run = get_run_for_user(request.auth, run_id)
    buffer = io.BytesIO()
    seal = services.export_bundle(run, buffer, request.auth)
    response = HttpResponse(buffer.getvalue(), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="run-{run.id}-{seal[:12]}.zip"'
    response["X-Bundle-Sha256"] = seal
    return response


@router.post(
    "/bundles", response=answers({201: dict[str, Any]}), summary="Import a bundle: its bytes, or a form's `bundle` file"
)
def import_bundle(request, query: Query[ImportQuery]):
    project = project_for_launch(request.auth, query.project)  # a viewer is refused before the upload is read
    upload = bundle_upload(request)  # capped at BUNDLE_MAX_BYTES before and while it is read (413)
    if upload is None:
        raise UserInputError("send the bundle as the body or as a form's `bundle` file", {"bundle": "missing"})
    with upload:
        return Status(201, run_json(services.import_bundle(upload, request.auth, project)))


@router.post(
    "/runs/{int:run_id}/verify",
    response=answers({201: dict[str, int]}),
    summary="Rerun the run and compare the streams",
)
def verify(request, run_id: RunId):
    verification = services.verify(get_run_for_user(request.auth, run_id, Action.CHANGE), request.auth)
    return Status(201, {"verification": verification.id, "rerun": verification.rerun_id})


@router.get("/runs/{int:run_id}/audit", auth=READERS, response=answers({200: dict[str, Any]}))
def audit(request, run_id: RunId):
    run = get_run_for_user(request.auth, run_id)
    verifications = [
        {"rerun": v.rerun_id, "result": v.result, "verdict": v.verdict}
        for v in Verification.objects.filter(original=run).order_by("id")
    ]
    return {"run": run.id, "record": services.record_for(run, request.auth), "verifications": verifications,
            "config_yaml": yaml.safe_dump(run.config, sort_keys=False)}  # fmt: skip


@router.get("/differences", response=answers({200: dict[str, Any]}), summary="What differs between two runs' records")
def differences(request, pair: Query[RunPair]):
    a, b = get_run_for_user(request.auth, pair.a), get_run_for_user(request.auth, pair.b)
    missing = [run.id for run in services.unrecorded(a, b)]  # queued: nothing recorded to compare yet
    differences = {} if missing else services.differences(a, b)
    return {"a": a.id, "b": b.id, "differences": differences, "unrecorded": missing}
