from django import template

from rolloutlab.audit import trust

register = template.Library()


@register.filter
def get_item(mapping, key):
    """{{ run.summary|get_item:"eval/pass@1" }}: metric names hold slashes, which template lookups cannot."""
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


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


@register.filter
def column_metric_format(column) -> str:
    """How runs_list.js writes a live metric cell: counters as whole numbers, the rest with 3 decimals."""
    return "int" if column.key == "rollout_tokens" else "float"
