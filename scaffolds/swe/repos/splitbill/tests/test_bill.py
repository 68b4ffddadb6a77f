from splitbill import Bill


def test_subtotal():
    bill = Bill(3)
    bill.add(12.5)
    bill.add(7.5)
    assert bill.subtotal() == 20


def test_one_dish_each():
    bill = Bill(2, tip_percent=10)
    bill.add(50)
    bill.add(50)
    assert bill.per_person() == 55.0
