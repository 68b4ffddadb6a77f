from queueing.pq import PriorityQueue
