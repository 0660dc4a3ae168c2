import json

from django import template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# What stored text must not say inside a <script>: `</script>` would close it and what follows would render as markup.
# Escaped as JSON's own \u escapes, which JSON.parse reads back as the same characters.
_IN_SCRIPT = str.maketrans({"<": "\\u003C", ">": "\\u003E", "&": "\\u0026"})


@register.filter
def script_json(value) -> SafeString:
    """`{{ chart|script_json }}` inside `<script type="application/json">`: a chart (its JSON text, or the object) with
    `<`, `>` and `&` escaped, so no stored key, value or query in it can close the script (as Django's json_script
    escapes; this keeps the tag's own class and data attributes)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return mark_safe(text.translate(_IN_SCRIPT))  # escaped just above


@register.filter
def get_item(mapping: dict, key):
    """`mapping|get_item:key`: a dict entry whose key is a variable."""
    return mapping.get(key, [])


@register.filter
def split(text: str) -> list[str]:
    """`"a b c"|split`: a list written in a template."""
    return text.split()


@register.filter
def pair(first, second) -> list:
    """`a|pair:b`: the two, to loop over as table cells."""
    return [first, second]
