"""A shopping cart."""


class Cart:
    def __init__(self, prices):
        self.prices = prices
        self.quantities = {}

    def add(self, product, quantity=1):
        self.quantities[product] = self.quantities.get(product, 0) + quantity

    def total(self):
        return sum(self.prices[p] for p, q in self.quantities.items() if q > 0)
