from bank import Account


def test_deposit_withdraw():
    a = Account(10)
    a.deposit(5)
    a.withdraw(3)
    assert a.balance == 12
