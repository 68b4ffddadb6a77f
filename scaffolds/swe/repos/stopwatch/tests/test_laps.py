from stopwatch import Stopwatch


def test_total_and_average():
    watch = Stopwatch()
    for seconds in (62, 58, 60):
        watch.lap(seconds)
    assert watch.total() == 180
    assert watch.average() == 60


def test_single_lap_is_fastest():
    watch = Stopwatch()
    watch.lap(61)
    assert watch.fastest() == 61
