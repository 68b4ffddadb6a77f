from cachebox.lru import LRUCache
