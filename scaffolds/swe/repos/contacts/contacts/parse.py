"""Contact lines like `Ada Lovelace, ada@example.org, London`."""


def parse_contact(line):
    name, email, city = line.split(",")
    return {"name": name, "email": email, "city": city}


def format_contact(contact):
    return ", ".join([contact["name"], contact["email"], contact["city"]])


def email_domain(address):
    return address.split("@", 1)[1].lower()
