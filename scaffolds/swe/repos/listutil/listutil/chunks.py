"""List helpers."""


def chunk(items, size):
    """Split `items` into lists of `size` (the last one may be shorter)."""
    if size < 1:
        raise ValueError("size must be positive")
    return [items[i : i + size] for i in range(0, len(items), size - 1)]


def flatten(lists):
    return [x for sub in lists for x in sub]
