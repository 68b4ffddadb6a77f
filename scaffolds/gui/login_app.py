"""The login application: a sign-in form, an account page, a password change and a password-reset request."""

from __future__ import annotations

from agentrl.scaffolds.gui.web_app import AppState, Page, Redirect, WebApp, button_form, checkbox, esc, note, text_field

USERS = {"alice": "wonderland", "bob": "builder42"}


class LoginApp(WebApp):
    name = "login"
    title = "Sign in"

    def initial_state(self) -> AppState:
        return AppState(
            {
                "passwords": dict(USERS),
                "user": None,
                "remember": False,
                "attempts": 0,
                "sign_ins": [],
                "sign_outs": 0,
                "reset_requests": [],
            }
        )

    def get(self, state: AppState, path: list[str], query: dict[str, str]) -> Page | Redirect | None:
        user = state.data["user"]
        if not path:
            if user:
                return Redirect(self.url("account"))
            error = note("Wrong username or password." if query.get("error") else None, "error")
            form = (
                f'<form method="post" action="{self.url("submit")}">'
                + text_field("username", "Username")
                + text_field("password", "Password", kind="password")
                + checkbox("remember", "Remember me", False)
                + '<button type="submit">Sign in</button></form>'
            )
            links = f'<p><a href="{self.url("forgot")}">Forgot password?</a></p>'
            return "Sign in", f"<h1>Sign in</h1>{error}{form}{links}"
        if path == ["account"]:
            if not user:
                return Redirect(self.url())
            changed = note("Password changed." if query.get("changed") else None)
            links = f'<p><a href="{self.url("password")}">Change password</a></p>'
            sign_out = button_form(self.url("logout"), "Sign out")
            return "Account", f"<h1>Account</h1>{changed}<p>Signed in as {esc(user)}</p>{links}{sign_out}"
        if path == ["password"]:
            if not user:
                return Redirect(self.url())
            error = note("Current password is wrong." if query.get("error") else None, "error")
            form = (
                f'<form method="post" action="{self.url("password")}">'
                + text_field("current", "Current password", kind="password")
                + text_field("new", "New password", kind="password")
                + '<button type="submit">Change password</button></form>'
            )
            return "Change password", f"<h1>Change password</h1>{error}{form}"
        if path == ["forgot"]:
            sent = note("Reset link sent." if query.get("sent") else None)
            form = (
                f'<form method="post" action="{self.url("forgot")}">'
                + text_field("email", "Email")
                + '<button type="submit">Send reset link</button></form>'
            )
            return "Reset password", f"<h1>Reset password</h1>{sent}{form}"
        return None

    def post(self, state: AppState, path: list[str], form: dict[str, str]) -> Redirect | None:
        data = state.data
        if path == ["submit"]:
            data["attempts"] += 1
            username = form.get("username", "").strip()
            if data["passwords"].get(username) != form.get("password") or not username:
                return Redirect(self.url() + "?error=1")
            data["user"], data["remember"] = username, form.get("remember") == "on"
            data["sign_ins"].append(username)
            return Redirect(self.url("account"))
        if path == ["logout"]:
            if data["user"]:
                data["sign_outs"] += 1
            data["user"] = None
            return Redirect(self.url())
        if path == ["password"] and data["user"]:
            if data["passwords"][data["user"]] != form.get("current") or not form.get("new"):
                return Redirect(self.url("password") + "?error=1")
            data["passwords"][data["user"]] = form["new"]
            return Redirect(self.url("account") + "?changed=1")
        if path == ["forgot"]:
            email = form.get("email", "").strip()
            if email:
                data["reset_requests"].append(email)
            return Redirect(self.url("forgot") + "?sent=1")
        return None
