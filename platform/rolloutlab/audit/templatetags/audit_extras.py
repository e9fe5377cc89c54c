"""The audit's badges on a run (templates/runs/_verified.html, _unverified.html): {% load audit_extras %}.

Here, not in the runs app's template library: the runs app knows nothing of the audit.
"""

from django import template

from rolloutlab.audit import trust

register = template.Library()


@register.filter
def verify_verdict(run) -> str:
    """The verdict of the run's latest finished Verify (the audit's Verification), or ""; uses a prefetch if made."""
    for verification in run.verifications.all():  # newest first
        if verification.result is not None:
            return verification.verdict
    return ""


@register.filter
def verified_because(run) -> str:
    """Why the run counts as verified (rolloutlab.audit.trust), or "": the title of its "verified" badge."""
    return trust.verified_because(run)
