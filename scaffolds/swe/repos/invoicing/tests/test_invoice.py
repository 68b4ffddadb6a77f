from invoicing import Invoice


def test_total_without_discount():
    assert Invoice([("a", 60.0), ("b", 40.0)]).total() == 100.0
