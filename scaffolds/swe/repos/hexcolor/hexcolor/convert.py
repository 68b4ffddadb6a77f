"""Hex colour codes."""


def hex_to_rgb(code):
    """`#ff8000` -> `(255, 128, 0)`."""
    digits = code.lstrip("#")
    return tuple(int(digits[i : i + 2], 16) for i in range(3))


def rgb_to_hex(red, green, blue):
    """`(255, 128, 0)` -> `#ff8000`."""
    return f"#{red:02x}{green:02x}{blue:02x}"
