from contacts.parse import email_domain, format_contact, parse_contact

__all__ = ["email_domain", "format_contact", "parse_contact"]
