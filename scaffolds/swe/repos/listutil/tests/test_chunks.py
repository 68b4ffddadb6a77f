import pytest

from listutil import chunk, flatten


def test_flatten():
    assert flatten([[1], [2, 3]]) == [1, 2, 3]


def test_chunk_rejects_zero():
    with pytest.raises(ValueError):
        chunk([1], 0)
