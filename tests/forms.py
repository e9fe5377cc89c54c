"""Reading a served form the way a browser submits it, for tests that post pages back."""

import re
from html import unescape


def form_values(page: str) -> dict[str, str]:
    """Every field of the page with its shown value: inputs, ticked checkboxes, selected options, textareas."""
    values = {}
    for name, value in re.findall(r'<input(?![^>]*type="checkbox")[^>]*name="([^"]+)"[^>]*value="([^"]*)"', page):
        values[name] = unescape(value)
    for name in re.findall(r'<input type="checkbox" name="([^"]+)"[^>]*checked', page):
        values[name] = "on"
    for name, body in re.findall(r'<select name="([^"]+)"[^>]*>(.*?)</select>', page, re.S):
        chosen = re.search(r"<option[^>]*selected[^>]*>([^<]*)<", body) or re.search(r"<option[^>]*>([^<]*)<", body)
        values[name] = unescape(chosen.group(1))
    for name, body in re.findall(r'<textarea name="([^"]+)"[^>]*>(.*?)</textarea>', page, re.S):
        values[name] = unescape(body)
    return values
