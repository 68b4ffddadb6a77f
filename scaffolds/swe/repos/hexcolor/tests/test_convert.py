from hexcolor import hex_to_rgb, rgb_to_hex


def test_rgb_to_hex():
    assert rgb_to_hex(255, 128, 0) == "#ff8000"


def test_black():
    assert hex_to_rgb("#000000") == (0, 0, 0)
