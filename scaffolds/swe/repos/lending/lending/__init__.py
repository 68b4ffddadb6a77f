from lending.checkout import LibraryCard

__all__ = ["LibraryCard"]
