import pytest

from inventory import Stock


def test_add_and_remove():
    s = Stock()
    s.add("bolt", 5)
    s.remove("bolt", 2)
    assert s.items["bolt"] == 3


def test_remove_too_many():
    s = Stock()
    s.add("nut", 1)
    with pytest.raises(ValueError):
        s.remove("nut", 2)
