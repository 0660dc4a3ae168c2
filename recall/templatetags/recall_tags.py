from django import template

register = template.Library()


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
