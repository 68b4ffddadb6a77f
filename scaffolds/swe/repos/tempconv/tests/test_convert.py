from tempconv import celsius_to_fahrenheit


def test_boiling():
    assert celsius_to_fahrenheit(100) == 212
