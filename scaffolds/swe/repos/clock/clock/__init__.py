from clock.fmt import format_duration
