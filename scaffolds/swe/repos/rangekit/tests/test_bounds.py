from rangekit import clamp, within


def test_within():
    assert within(3, 1, 5)


def test_clamp_low_and_inside():
    assert clamp(-2, 0, 10) == 0
    assert clamp(4, 0, 10) == 4
