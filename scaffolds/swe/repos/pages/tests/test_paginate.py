from pages import page_count, page_items


def test_partial_last_page():
    assert page_count(25, 10) == 3


def test_first_page():
    assert page_items(list(range(25)), 1, 10) == list(range(10))


def test_last_page():
    assert page_items(list(range(25)), 3, 10) == [20, 21, 22, 23, 24]
