"""A tiny comma-separated parser (no quoting)."""


def parse_line(line):
    return [field for field in line.split(",")]


def parse_text(text):
    return [parse_line(line) for line in text.splitlines() if line.strip()]
