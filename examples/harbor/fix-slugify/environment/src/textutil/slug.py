import re


def slugify(title):
    """A URL slug: lowercase words joined by single hyphens."""
    return re.sub(r"[^a-z0-9]", "-", title.lower())
