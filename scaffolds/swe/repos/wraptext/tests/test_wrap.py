from wraptext import wrap


def test_empty():
    assert wrap("", 10) == []
