"""The `gui` toolset: a headless chromium page per session, observed as a numbered outline (or a screenshot)."""

from agentrl.tools.gui.browser import Browser, ScreenshotBrowser

__all__ = ["Browser", "ScreenshotBrowser"]
