"""`WebApp`: what a bundled application is to the `AppServer`, and the HTML helpers the applications share.

An application owns one `AppState` per episode: `initial_state()` makes it, `get` renders a page from it and
`post` changes it and answers with a `Redirect` (post/redirect/get). Paths are given without the application's
own prefix (`/todo/add` arrives as `["add"]`). Checkers read `AppState.data` and `AppState.visits`.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any


@dataclass
class AppState:
    """One application's state in one episode."""

    data: dict[str, Any]
    visits: list[str] = field(default_factory=list)
    """Every path requested, in order (so a checker can tell that a page was opened)."""


@dataclass(frozen=True)
class Redirect:
    path: str


Page = tuple[str, str]
"""(title, body HTML)."""


class WebApp:
    """Base of the bundled applications; subclasses set `name`, `title` and implement the three methods."""

    name = ""
    title = ""

    def initial_state(self) -> AppState:
        raise NotImplementedError

    def get(self, state: AppState, path: list[str], query: dict[str, str]) -> Page | Redirect | None:
        raise NotImplementedError

    def post(self, state: AppState, path: list[str], form: dict[str, str]) -> Redirect | None:
        raise NotImplementedError

    def url(self, *parts: object) -> str:
        return "/" + "/".join([self.name, *(str(p) for p in parts)])


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def button_form(action: str, label: str) -> str:
    """A form with one submit button: the way every state change of the bundled applications is made."""
    return f'<form method="post" action="{esc(action)}"><button type="submit">{esc(label)}</button></form>'


def text_field(name: str, label: str, value: str = "", kind: str = "text") -> str:
    return f'<label>{esc(label)} <input type="{kind}" name="{esc(name)}" value="{esc(value)}"></label>'


def checkbox(name: str, label: str, checked: bool) -> str:
    mark = " checked" if checked else ""
    return f'<label><input type="checkbox" name="{esc(name)}" value="on"{mark}> {esc(label)}</label>'


def select(name: str, label: str, options: list[str], chosen: str) -> str:
    items = "".join(f"<option{' selected' if o == chosen else ''}>{esc(o)}</option>" for o in options)
    return f'<label>{esc(label)} <select name="{esc(name)}">{items}</select></label>'


def note(text: str | None, kind: str = "note") -> str:
    return f'<p class="{kind}">{esc(text)}</p>' if text else ""


def money(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"
