from eventlog import Event, daily_report


def test_same_hour():
    events = [Event(10, 30, "b"), Event(10, 5, "a")]
    assert daily_report(events) == ["10:05 a", "10:30 b"]
