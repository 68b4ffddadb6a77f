from romans import from_roman, to_roman


def test_simple():
    assert to_roman(3) == "III"
    assert to_roman(2000) == "MM"


def test_from_roman():
    assert from_roman("XIV") == 14
