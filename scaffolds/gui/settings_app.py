"""The settings application: a preferences form saved as a whole, a reset, and a guarded account deletion."""

from __future__ import annotations

from agentrl.scaffolds.gui.web_app import (
    AppState,
    Page,
    Redirect,
    WebApp,
    button_form,
    checkbox,
    esc,
    note,
    select,
    text_field,
)

DEFAULTS = {
    "display_name": "Alex",
    "theme": "Light",
    "language": "English",
    "email_notifications": True,
    "newsletter": False,
}
THEMES = ["Light", "Dark", "System"]
LANGUAGES = ["English", "French", "German", "Spanish"]


class SettingsApp(WebApp):
    name = "settings"
    title = "Settings"

    def initial_state(self) -> AppState:
        return AppState({"settings": dict(DEFAULTS), "saves": 0, "resets": 0, "account_deleted": False})

    def get(self, state: AppState, path: list[str], query: dict[str, str]) -> Page | Redirect | None:
        data = state.data
        if data["account_deleted"]:
            return "Account deleted", "<h1>Account deleted</h1><p>Your account has been deleted.</p>"
        s = data["settings"]
        if not path:
            saved = note("Settings saved." if query.get("saved") else None)
            form = (
                f'<form method="post" action="{self.url("save")}">'
                + text_field("display_name", "Display name", s["display_name"])
                + select("theme", "Theme", THEMES, s["theme"])
                + select("language", "Language", LANGUAGES, s["language"])
                + checkbox("email_notifications", "Email notifications", s["email_notifications"])
                + checkbox("newsletter", "Newsletter", s["newsletter"])
                + '<button type="submit">Save settings</button></form>'
            )
            reset = button_form(self.url("reset"), "Reset to defaults")
            danger = f'<p><a href="{self.url("danger")}">Danger zone</a></p>'
            return "Settings", f"<h1>Settings</h1>{saved}{form}{reset}{danger}"
        if path == ["danger"]:
            error = note("Tick the box to confirm." if query.get("error") else None, "error")
            form = (
                f'<form method="post" action="{self.url("delete")}">'
                + checkbox("confirm", "I understand this cannot be undone", False)
                + '<button type="submit">Delete my account</button></form>'
            )
            back = f'<p><a href="{self.url()}">Back to settings</a></p>'
            return "Danger zone", f"<h1>Danger zone</h1>{error}<p>Signed in as {esc(s['display_name'])}</p>{form}{back}"
        return None

    def post(self, state: AppState, path: list[str], form: dict[str, str]) -> Redirect | None:
        data = state.data
        if path == ["save"]:
            s = data["settings"]
            s["display_name"] = form.get("display_name", "").strip() or s["display_name"]
            s["theme"] = form.get("theme") if form.get("theme") in THEMES else s["theme"]
            s["language"] = form.get("language") if form.get("language") in LANGUAGES else s["language"]
            s["email_notifications"] = form.get("email_notifications") == "on"
            s["newsletter"] = form.get("newsletter") == "on"
            data["saves"] += 1
            return Redirect(self.url() + "?saved=1")
        if path == ["reset"]:
            data["settings"], data["resets"] = dict(DEFAULTS), data["resets"] + 1
            return Redirect(self.url())
        if path == ["delete"]:
            if form.get("confirm") != "on":
                return Redirect(self.url("danger") + "?error=1")
            data["account_deleted"] = True
            return Redirect(self.url())
        return None
