from csvlite import parse_text


def test_rows():
    assert parse_text("a,b\nc,d\n") == [["a", "b"], ["c", "d"]]
