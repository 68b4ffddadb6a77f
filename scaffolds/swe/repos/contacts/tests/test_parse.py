from contacts import email_domain, format_contact, parse_contact


def test_format():
    contact = {"name": "Ada Lovelace", "email": "ada@example.org", "city": "London"}
    assert format_contact(contact) == "Ada Lovelace, ada@example.org, London"


def test_name():
    assert parse_contact("Ada Lovelace, ada@example.org, London")["name"] == "Ada Lovelace"


def test_domain():
    assert email_domain("ada@Example.org") == "example.org"
