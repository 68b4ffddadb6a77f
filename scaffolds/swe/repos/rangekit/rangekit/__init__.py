from rangekit.bounds import clamp, within
