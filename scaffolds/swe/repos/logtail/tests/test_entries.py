from logtail import is_error, log_level


def test_level():
    assert log_level("2024-01-05 12:00:01 WARNING low memory") == "WARNING"


def test_is_error():
    assert is_error("2024-01-05 12:00:01 ERROR disk full")
    assert not is_error("2024-01-05 12:00:02 INFO started")
