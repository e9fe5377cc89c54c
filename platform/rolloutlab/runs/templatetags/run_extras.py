from django import template

register = template.Library()


@register.filter
def get_item(mapping, key):
    """{{ run.summary|get_item:"eval/pass@1" }}: metric names hold slashes, which template lookups cannot."""
    return mapping.get(key, "") if isinstance(mapping, dict) else ""
