from tournament import LeagueTable


def test_points():
    table = LeagueTable()
    table.record("Rovers", "United", 2, 1)
    table.record("United", "City", 0, 0)
    assert table.points == {"Rovers": 3, "United": 1, "City": 1}


def test_ranking():
    table = LeagueTable()
    table.record("Rovers", "United", 0, 2)
    assert table.ranking() == ["United", "Rovers"]
