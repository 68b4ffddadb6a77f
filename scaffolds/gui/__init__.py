"""The GUI scaffold: goals over four local web applications, checked against the applications' state."""

from agentrl.scaffolds.gui.gui_scaffold import GuiScaffold, GuiScreenshotScaffold

__all__ = ["GuiScaffold", "GuiScreenshotScaffold"]
