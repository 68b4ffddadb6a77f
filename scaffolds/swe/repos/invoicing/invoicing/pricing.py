"""Price rules."""


def apply_discount(amount, percent):
    return round(amount * (1 - percent / 100), 2)
