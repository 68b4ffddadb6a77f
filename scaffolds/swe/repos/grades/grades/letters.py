"""Letter grades from percentage scores."""

CUTOFFS = [(90, "A"), (80, "B"), (70, "C"), (60, "D")]


def letter_grade(score):
    """`85` -> `B`; below 60 -> `F`."""
    for cutoff, letter in CUTOFFS:
        if score > cutoff:
            return letter
    return "F"


def passed(score):
    return letter_grade(score) != "F"
