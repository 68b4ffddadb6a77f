from healthcalc import bmi_category


def test_categories():
    assert bmi_category(17.0) == "underweight"
    assert bmi_category(22.4) == "normal"
    assert bmi_category(27.0) == "overweight"
    assert bmi_category(31.2) == "obese"
