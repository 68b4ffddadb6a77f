from urlkit import UrlBuilder


def test_segments():
    assert UrlBuilder("https://example.org").url("api", "/users/") == "https://example.org/api/users"


def test_params():
    builder = UrlBuilder("https://example.org").with_param("page", 2).with_param("q", "tea")
    assert builder.url("search") == "https://example.org/search?page=2&q=tea"
