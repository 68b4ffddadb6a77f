from matrix.ops import identity, transpose
