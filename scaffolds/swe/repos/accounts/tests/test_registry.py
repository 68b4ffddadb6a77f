import pytest

from accounts import DuplicateUser, Registry


def test_register_twice():
    r = Registry()
    r.register("ann@example.com", "Ann")
    with pytest.raises(DuplicateUser):
        r.register("ann@example.com", "Ann")
