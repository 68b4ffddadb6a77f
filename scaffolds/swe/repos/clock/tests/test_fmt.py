from clock import format_duration


def test_short():
    assert format_duration(65) == "0:01:05"
