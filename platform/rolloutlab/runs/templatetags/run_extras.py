from django import template

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
