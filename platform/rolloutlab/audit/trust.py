"""Whether a run is verified, for the runs table's badge: reproduced here by Verify, or imported signed.

The other side, an import no trusted key signed, is Run.unverified (set at import, cleared by a Verify
that reproduced it); a Verify that diverged shows its verdict. A run launched here and never verified
gets neither badge: nothing has checked it, and nothing has cast doubt on it.
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef

from rolloutlab.audit.models import AuditRecord

REPRODUCED = "Verify reran this run here and every metric point matched"
SIGNED = "imported from a bundle that a key this deployment trusts signed"


def signed_import():
    """An annotation: the run came in a bundle whose signature a trusted key made."""
    trusted = AuditRecord.objects.filter(run=OuterRef("pk"), signer_trusted=True).exclude(imported_from="")
    return Exists(trusted)


def verified_because(run) -> str:
    """Why the run counts as verified, or "" (uses the verifications' prefetch and `signed_import` if made)."""
    for verification in run.verifications.all():  # newest first: the latest finished one decides
        if verification.result is not None:
            return REPRODUCED if verification.result.get("identical") else ""  # diverged: not verified
    if run.unverified:
        return ""
    signed = getattr(run, "signed_import", None)
    if signed is None:
        signed = AuditRecord.objects.filter(run=run, signer_trusted=True).exclude(imported_from="").exists()
    return SIGNED if signed else ""
