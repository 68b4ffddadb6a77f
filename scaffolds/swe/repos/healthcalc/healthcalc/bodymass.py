"""Body mass index (kilograms and metres)."""


def body_mass_index(weight_kg, height_m):
    """`body_mass_index(80, 2.0)` -> `20.0`."""
    return round(weight_kg / height_m * 2, 1)


def bmi_category(bmi):
    if bmi < 18.5:
        return "underweight"
    if bmi < 25:
        return "normal"
    if bmi < 30:
        return "overweight"
    return "obese"
