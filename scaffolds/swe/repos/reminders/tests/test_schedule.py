import datetime

from reminders import should_send


def test_monday_and_sunday():
    assert should_send(datetime.date(2024, 1, 1))
    assert not should_send(datetime.date(2024, 1, 7))
