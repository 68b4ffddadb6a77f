import pytest

from mathkit import mean, total


def test_total():
    assert total([1, 2, 3]) == 6


def test_mean_rejects_empty():
    with pytest.raises(ValueError):
        mean([])
