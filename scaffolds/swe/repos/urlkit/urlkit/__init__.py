from urlkit.builder import UrlBuilder

__all__ = ["UrlBuilder"]
