from accounts.registry import DuplicateUser, Registry
