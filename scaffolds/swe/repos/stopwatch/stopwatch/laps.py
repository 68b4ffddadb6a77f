"""A stopwatch that records lap times in seconds."""


class Stopwatch:
    def __init__(self):
        self.laps = []

    def lap(self, seconds):
        self.laps.append(seconds)

    def total(self):
        return sum(self.laps)

    def average(self):
        return self.total() / len(self.laps)

    def fastest(self):
        """The shortest lap time."""
        return max(self.laps)
