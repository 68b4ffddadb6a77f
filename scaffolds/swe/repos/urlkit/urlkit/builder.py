"""Building URLs from a base address, path segments and query parameters."""


class UrlBuilder:
    def __init__(self, base):
        self.base = base
        self.params = {}

    def with_param(self, key, value):
        self.params[key] = value
        return self

    def url(self, *segments):
        base = self.base.lstrip("/")
        path = "/".join(segment.strip("/") for segment in segments)
        address = f"{base}/{path}"
        if self.params:
            address += "?" + "&".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return address
