from slugify import slugify


def test_plain_words():
    assert slugify("Hello World") == "hello-world"
