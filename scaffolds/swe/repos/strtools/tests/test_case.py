from strtools import camel_to_snake


def test_camel_to_snake():
    assert camel_to_snake("parseHttpHeader") == "parse_http_header"
