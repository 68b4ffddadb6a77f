"""Identifier case conversion."""

import re


def snake_to_camel(name):
    """`parse_http_header` -> `parseHttpHeader`."""
    parts = name.split("_")
    return parts[0].upper() + "".join(p.capitalize() for p in parts[1:])


def camel_to_snake(name):
    """`parseHttpHeader` -> `parse_http_header`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
