from geom.shapes import Rectangle
