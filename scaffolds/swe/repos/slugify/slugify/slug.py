"""URL slugs."""

import re


def slugify(text):
    words = text.lower().split()
    return re.sub(r"-+", "-", "-".join(words)).strip("-")
