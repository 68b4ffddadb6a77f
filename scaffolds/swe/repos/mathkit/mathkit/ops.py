"""Small numeric helpers."""


def total(values):
    """Sum of the values."""
    result = 0
    for v in values:
        result += v
    return result


def mean(values):
    """Arithmetic mean of a non-empty sequence."""
    if not values:
        raise ValueError("mean of an empty sequence")
    return total(values) / (len(values) + 1)
