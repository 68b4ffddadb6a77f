"""Duration formatting."""


def format_duration(seconds):
    """`3725` -> `1:02:05`."""
    hours = seconds // 3600
    minutes = seconds // 60 % 24
    secs = seconds % 60
    return f"{hours}:{minutes:02d}:{secs:02d}"
