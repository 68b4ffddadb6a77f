from logtail.entries import is_error, log_level, message_text

__all__ = ["is_error", "log_level", "message_text"]
