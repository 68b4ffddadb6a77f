from geom import Rectangle


def test_area():
    assert Rectangle(3, 4).area() == 12
