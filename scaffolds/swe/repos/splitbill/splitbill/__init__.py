from splitbill.bill import Bill

__all__ = ["Bill"]
