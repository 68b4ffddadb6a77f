"""The bundled web applications by name (the first segment of their paths on the `AppServer`)."""

from __future__ import annotations

from agentrl.scaffolds.gui.login_app import LoginApp
from agentrl.scaffolds.gui.settings_app import SettingsApp
from agentrl.scaffolds.gui.shop_app import ShopApp
from agentrl.scaffolds.gui.todo_app import TodoApp
from agentrl.scaffolds.gui.web_app import AppState, Redirect, WebApp

APPS: dict[str, WebApp] = {app.name: app for app in (LoginApp(), TodoApp(), SettingsApp(), ShopApp())}

__all__ = ["APPS", "AppState", "Redirect", "WebApp"]
