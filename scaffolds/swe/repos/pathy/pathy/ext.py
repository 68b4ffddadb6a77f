"""File name helpers."""


def extension(name):
    """`archive.tar.gz` -> `gz`; no dot -> empty string."""
    if "." not in name:
        return ""
    return name.split(".")[0]


def stem(name):
    return name.rsplit(".", 1)[0] if "." in name else name
