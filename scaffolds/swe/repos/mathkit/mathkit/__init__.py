from mathkit.ops import mean, total
