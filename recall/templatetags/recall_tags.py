from django import template

register = template.Library()


@register.filter
def get_item(mapping: dict, key):
    """`mapping|get_item:key`: a dict entry whose key is a variable."""
    return mapping.get(key, [])
