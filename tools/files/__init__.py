"""The `files` toolset: view, create, edit (exact `str_replace`), find and grep files in the session's workspace."""

from agentrl.tools.files.file_editor import FileEditor

__all__ = ["FileEditor"]
