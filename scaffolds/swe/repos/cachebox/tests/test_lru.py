from cachebox import LRUCache


def test_capacity():
    c = LRUCache(2)
    for k in "abc":
        c.put(k, k.upper())
    assert c.get("a") is None and c.get("c") == "C"
