from wordcount import count_words, most_common


def test_simple_sentence():
    assert count_words("one two three") == 3


def test_most_common():
    assert most_common("a b a") == ["a"]
