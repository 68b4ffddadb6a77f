from grades.letters import letter_grade, passed

__all__ = ["letter_grade", "passed"]
