"""Event log reports."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    hour: int
    minute: int
    text: str

    def stamp(self):
        return f"{self.hour}:{self.minute:02d}"


def daily_report(events):
    ordered = sorted(events, key=lambda e: e.stamp())
    return [f"{e.stamp()} {e.text}" for e in ordered]
