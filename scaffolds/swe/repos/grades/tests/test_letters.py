from grades import letter_grade, passed


def test_middle_of_a_band():
    assert letter_grade(85) == "B"


def test_fail():
    assert letter_grade(42) == "F"
    assert not passed(42)


def test_pass():
    assert passed(75)
