from config_ini import parse_config


def test_pairs_and_comments():
    assert parse_config("# hi\na = 1\nb=two\n") == {"a": "1", "b": "two"}
