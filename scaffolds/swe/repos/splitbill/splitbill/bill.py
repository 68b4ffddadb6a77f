"""Splitting a restaurant bill between the people at the table."""


class Bill:
    def __init__(self, people, tip_percent=15):
        self.people = people
        self.tip_percent = tip_percent
        self.items = []

    def add(self, price):
        self.items.append(price)

    def subtotal(self):
        return sum(self.items)

    def per_person(self):
        """What each person pays, tip included, rounded to cents."""
        total = self.subtotal() * (1 + self.tip_percent / 100)
        return round(total / len(self.items), 2)
