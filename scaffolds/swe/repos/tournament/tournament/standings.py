"""A league table: three points for a win, one for a draw."""


class LeagueTable:
    def __init__(self):
        self.points = {}

    def record(self, home, away, home_goals, away_goals):
        for team in (home, away):
            self.points.setdefault(team, 0)
        if home_goals > away_goals:
            self.points[home] += 3
        elif home_goals < away_goals:
            self.points[away] += 3
        else:
            self.points[home] += 1
            self.points[away] += 1

    def ranking(self):
        """Teams from the most points to the fewest."""
        return sorted(self.points, key=self.points.get, reverse=True)

    def leader(self):
        return self.ranking()[-1]
