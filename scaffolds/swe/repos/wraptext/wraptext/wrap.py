"""Greedy line wrapping."""


def wrap(text, width):
    lines, current = [], []
    for word in text.split():
        if current and len(" ".join(current + [word])) > width:
            lines.append(" ".join(current))
            current = []
        current.append(word)
    return lines
