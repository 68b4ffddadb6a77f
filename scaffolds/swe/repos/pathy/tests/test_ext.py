from pathy import extension, stem


def test_stem():
    assert stem("report.pdf") == "report"


def test_no_extension():
    assert extension("Makefile") == ""
