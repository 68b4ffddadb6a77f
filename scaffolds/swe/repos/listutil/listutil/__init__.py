from listutil.chunks import chunk, flatten
