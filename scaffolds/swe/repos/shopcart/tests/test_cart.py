from shopcart import Cart


def test_single_units():
    cart = Cart({"pen": 2, "book": 10})
    cart.add("pen")
    cart.add("book")
    assert cart.total() == 12
