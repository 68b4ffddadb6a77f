"""Range helpers."""


def within(value, low, high):
    return low <= value <= high


def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return low
    return value
