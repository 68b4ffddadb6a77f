"""Splitting a list of search results into pages."""


def page_count(total, per_page):
    """How many pages `total` results fill: `page_count(25, 10)` -> `3`."""
    return (total + per_page) // per_page


def page_items(items, page, per_page):
    """The items on page `page`, numbered from 1."""
    start = (page - 1) * per_page
    return items[start : start + per_page]
