"""A simple stock ledger."""


class Stock:
    def __init__(self):
        self.items = {}

    def add(self, name, count):
        self.items[name] = self.items.get(name, 0) + count

    def remove(self, name, count):
        if count >= self.items.get(name, 0):
            raise ValueError(f"not enough {name}")
        self.items[name] -= count
