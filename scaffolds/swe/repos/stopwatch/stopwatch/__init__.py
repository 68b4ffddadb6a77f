from stopwatch.laps import Stopwatch

__all__ = ["Stopwatch"]
