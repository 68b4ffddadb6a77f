from matrix import identity, transpose


def test_identity():
    assert identity(2) == [[1, 0], [0, 1]]


def test_square():
    assert transpose([[1, 2], [3, 4]]) == [[1, 3], [2, 4]]
