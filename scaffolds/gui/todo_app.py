"""The todo application: a list of items with priorities, each marked done or deleted by its own button."""

from __future__ import annotations

from agentrl.scaffolds.gui.web_app import AppState, Page, Redirect, WebApp, button_form, esc, note, select, text_field

ITEMS = (("Buy milk", "Normal"), ("Walk the dog", "High"), ("Pay rent", "High"), ("Read a book", "Low"))
PRIORITIES = ["Low", "Normal", "High"]


class TodoApp(WebApp):
    name = "todo"
    title = "Todo list"

    def initial_state(self) -> AppState:
        items = [{"title": t, "priority": p, "done": False} for t, p in ITEMS]
        return AppState({"items": items, "added": 0, "deleted": [], "cleared": 0})

    def get(self, state: AppState, path: list[str], query: dict[str, str]) -> Page | Redirect | None:
        if path:
            return None
        rows = []
        for k, item in enumerate(state.data["items"]):
            title = item["title"]
            status = "done" if item["done"] else f"priority {item['priority'].lower()}"
            toggle = f"Mark not done: {title}" if item["done"] else f"Mark done: {title}"
            rows.append(
                f"<li><span>{esc(title)} ({status})</span>"
                + button_form(self.url("toggle", k), toggle)
                + button_form(self.url("delete", k), f"Delete: {title}")
                + "</li>"
            )
        listing = f"<ul>{''.join(rows)}</ul>" if rows else "<p>Nothing to do.</p>"
        error = note("A todo needs a title." if query.get("error") else None, "error")
        add = (
            f'<form method="post" action="{self.url("add")}">'
            + text_field("title", "New todo")
            + select("priority", "Priority", PRIORITIES, "Normal")
            + '<button type="submit">Add</button></form>'
        )
        clear = button_form(self.url("clear"), "Clear completed")
        return "Todo list", f"<h1>Todo list</h1>{error}{listing}{add}{clear}"

    def post(self, state: AppState, path: list[str], form: dict[str, str]) -> Redirect | None:
        items = state.data["items"]
        if path == ["add"]:
            title = form.get("title", "").strip()
            if not title:
                return Redirect(self.url() + "?error=1")
            priority = form.get("priority") if form.get("priority") in PRIORITIES else "Normal"
            items.append({"title": title, "priority": priority, "done": False})
            state.data["added"] += 1
        elif len(path) == 2 and path[0] in ("toggle", "delete") and path[1].isdigit() and int(path[1]) < len(items):
            k = int(path[1])
            if path[0] == "toggle":
                items[k]["done"] = not items[k]["done"]
            else:
                state.data["deleted"].append(items.pop(k)["title"])
        elif path == ["clear"]:
            state.data["cleared"] += 1
            state.data["items"] = [item for item in items if not item["done"]]
        else:
            return None
        return Redirect(self.url())
