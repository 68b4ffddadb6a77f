"""Invoices."""

from invoicing.pricing import apply_discount


class Invoice:
    def __init__(self, lines, discount_percent=0):
        self.lines = lines
        self.discount_percent = discount_percent

    def subtotal(self):
        return round(sum(price for _, price in self.lines), 2)

    def discounted(self):
        return apply_discount(self.subtotal(), self.discount_percent)

    def total(self):
        return apply_discount(self.discounted(), self.discount_percent)
