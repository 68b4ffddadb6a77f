"""A library card: borrowed books and overdue fines."""


class LibraryCard:
    LOAN_DAYS = 21
    FINE_PER_DAY = 0.25

    def __init__(self, holder):
        self.holder = holder
        self.borrowed = {}

    def borrow(self, title, on):
        self.borrowed[title] = on

    def days_overdue(self, title, today):
        held = (self.borrowed[title] - today).days
        return max(0, held - self.LOAN_DAYS)

    def fine(self, title, today):
        return self.days_overdue(title, today) * self.FINE_PER_DAY
