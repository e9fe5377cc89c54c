from django import template

register = template.Library()


@register.filter
def get_item(mapping, key):
    """{{ run.summary|get_item:"eval/pass@1" }}: metric names hold slashes, which template lookups cannot."""
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


@register.filter
def column_metric_format(column) -> str:
    """How runs_list.js writes a live metric cell: counters as whole numbers, the rest with 3 decimals."""
    return "int" if column.key == "rollout_tokens" else "float"
