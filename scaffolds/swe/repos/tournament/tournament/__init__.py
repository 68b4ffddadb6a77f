from tournament.standings import LeagueTable

__all__ = ["LeagueTable"]
