"""Server log lines: `2024-01-05 12:00:01 ERROR disk full`."""


def log_level(line):
    return line.split()[2]


def message_text(line):
    """The free text after the date, the time and the level."""
    return line.split(" ", 2)[2]


def is_error(line):
    return log_level(line) in ("ERROR", "CRITICAL")
