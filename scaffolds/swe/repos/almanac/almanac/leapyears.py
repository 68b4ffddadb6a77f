"""Leap years in the Gregorian calendar."""


def is_leap_year(year):
    """Every fourth year, except centuries that are not multiples of 400."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 != 0)


def days_in_year(year):
    return 366 if is_leap_year(year) else 365
