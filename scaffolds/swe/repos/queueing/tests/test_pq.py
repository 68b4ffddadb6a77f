from queueing import PriorityQueue


def test_len():
    q = PriorityQueue()
    q.push("a", 1)
    assert len(q) == 1 and q.pop() == "a"
