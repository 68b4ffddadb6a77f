"""When reminders go out."""

import datetime


def is_weekend(day):
    return day.weekday() >= 6


def should_send(day):
    return not is_weekend(day)
