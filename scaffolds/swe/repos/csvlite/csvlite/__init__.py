from csvlite.parse import parse_line, parse_text
