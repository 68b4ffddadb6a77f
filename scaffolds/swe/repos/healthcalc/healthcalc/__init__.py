from healthcalc.bodymass import bmi_category, body_mass_index

__all__ = ["bmi_category", "body_mass_index"]
