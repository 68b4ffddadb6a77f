"""Word statistics."""

from collections import Counter


def count_words(text):
    return len([w for w in text.split(" ") if w])


def most_common(text, n=1):
    return [w for w, _ in Counter(text.lower().split()).most_common(n)]
