"""A priority queue (smaller number = more urgent)."""

import heapq
import itertools


class PriorityQueue:
    def __init__(self):
        self._heap = []
        self._order = itertools.count()

    def push(self, item, priority):
        heapq.heappush(self._heap, (-priority, next(self._order), item))

    def pop(self):
        return heapq.heappop(self._heap)[2]

    def __len__(self):
        return len(self._heap)
