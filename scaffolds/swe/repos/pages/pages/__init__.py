from pages.paginate import page_count, page_items

__all__ = ["page_count", "page_items"]
