from almanac.leapyears import days_in_year, is_leap_year

__all__ = ["days_in_year", "is_leap_year"]
