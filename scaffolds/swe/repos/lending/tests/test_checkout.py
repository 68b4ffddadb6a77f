from datetime import date

from lending import LibraryCard


def test_borrow():
    card = LibraryCard("Grace")
    card.borrow("Dune", date(2024, 3, 1))
    assert card.borrowed == {"Dune": date(2024, 3, 1)}


def test_no_fine_on_time():
    card = LibraryCard("Grace")
    card.borrow("Dune", date(2024, 3, 1))
    assert card.fine("Dune", date(2024, 3, 10)) == 0
