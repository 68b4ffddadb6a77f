"""Matrices as lists of rows."""


def identity(n):
    return [[1 if i == j else 0 for j in range(n)] for i in range(n)]


def transpose(m):
    if not m:
        return []
    return [[m[r][c] for r in range(len(m))] for c in range(len(m))]
