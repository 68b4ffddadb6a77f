"""User registration."""


class DuplicateUser(Exception):
    pass


class Registry:
    def __init__(self):
        self.users = {}

    def register(self, email, name):
        key = email.strip()
        if key in self.users:
            raise DuplicateUser(email)
        self.users[key] = name
        return key
