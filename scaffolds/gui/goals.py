"""The bundled GUI goals, application by application: what to reach, how an expert reaches it, how to check it.

`GuiTask` is how one goal is written down; `goals()` lists them all in the fixed order `tasks.py` splits into
train and held-out tasks. A checker reads the applications' states after the episode (`AppState.data`), so a goal
is reached only when the application changed as asked, whatever the page showed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentrl.scaffolds.gui.login_app import USERS
from agentrl.scaffolds.gui.shop_app import PRODUCTS
from agentrl.scaffolds.gui.todo_app import ITEMS
from agentrl.scaffolds.gui.web_app import AppState

States = dict[str, AppState]
Step = tuple[Any, ...]


@dataclass(frozen=True)
class GuiTask:
    """One goal, where it starts, how an expert reaches it, and how to tell that it was reached."""

    id: str
    app: str
    tier: str
    goal: str
    steps: tuple[Step, ...]
    check: Callable[[States], bool]


def _same(a: Any, b: str) -> bool:
    return isinstance(a, str) and a.strip().casefold() == b.casefold()


def _todo(states: States, title: str) -> dict | None:
    return next((i for i in states["todo"].data["items"] if _same(i["title"], title)), None)


def _last_order(states: States) -> dict:
    orders = states["shop"].data["orders"]
    return orders[-1] if len(orders) == 1 else {}


def _login_tasks() -> list[GuiTask]:
    def data(s: States) -> dict:
        return s["login"].data

    sign_in = lambda user: (  # noqa: E731
        ("type", "textbox", "Username", user),
        ("type", "password", "Password", USERS[user]),
    )
    return [
        GuiTask(
            "forgot-link",
            "login",
            "easy",
            "Click the link labelled 'Forgot password?'.",
            (("click", "link", "Forgot password?"),),
            lambda s: "/login/forgot" in s["login"].visits,
        ),
        GuiTask(
            "sign-in-button",
            "login",
            "easy",
            "Click the button labelled 'Sign in'.",
            (("click", "button", "Sign in"),),
            lambda s: data(s)["attempts"] >= 1,
        ),
        GuiTask(
            "sign-in-alice",
            "login",
            "medium",
            "Sign in as alice with the password wonderland.",
            (*sign_in("alice"), ("click", "button", "Sign in")),
            lambda s: data(s)["user"] == "alice",
        ),
        GuiTask(
            "reset-bob",
            "login",
            "medium",
            "Ask for a password reset link for bob@example.com.",
            (
                ("click", "link", "Forgot password?"),
                ("type", "textbox", "Email", "bob@example.com"),
                ("click", "button", "Send reset link"),
            ),
            lambda s: any(_same(e, "bob@example.com") for e in data(s)["reset_requests"]),
        ),
        GuiTask(
            "change-password-bob",
            "login",
            "hard",
            "Sign in as bob (password builder42) and change his password to hammer99.",
            (
                *sign_in("bob"),
                ("click", "button", "Sign in"),
                ("click", "link", "Change password"),
                ("type", "password", "Current password", "builder42"),
                ("type", "password", "New password", "hammer99"),
                ("click", "button", "Change password"),
            ),
            lambda s: data(s)["passwords"]["bob"] == "hammer99",
        ),
        GuiTask(
            "remember-then-sign-out",
            "login",
            "hard",
            "Sign in as alice (password wonderland) with 'Remember me' ticked, then sign out.",
            (*sign_in("alice"), ("click", "checkbox", "Remember me"), ("click", "button", "Sign in"))
            + (("click", "button", "Sign out"),),
            lambda s: data(s)["sign_ins"] == ["alice"] and data(s)["remember"] and data(s)["user"] is None,
        ),
    ]


def _todo_tasks() -> list[GuiTask]:
    def slug(title: str) -> str:
        return title.lower().replace(" ", "-")

    easy = []
    for title, _ in ITEMS:
        label = f"Mark done: {title}"
        easy.append(
            GuiTask(
                f"done-{slug(title)}",
                "todo",
                "easy",
                f"Click the button labelled '{label}'.",
                (("click", "button", label),),
                lambda s, t=title: bool((_todo(s, t) or {}).get("done")),
            )
        )
    for title, _ in ITEMS:
        label = f"Delete: {title}"
        easy.append(
            GuiTask(
                f"delete-{slug(title)}",
                "todo",
                "easy",
                f"Click the button labelled '{label}'.",
                (("click", "button", label),),
                lambda s, t=title: _todo(s, t) is None,
            )
        )
    return easy + [
        GuiTask(
            "add-call-mom",
            "todo",
            "medium",
            "Add a todo 'Call mom'.",
            (("type", "textbox", "New todo", "Call mom"), ("click", "button", "Add")),
            lambda s: _todo(s, "Call mom") is not None,
        ),
        GuiTask(
            "add-taxes-high",
            "todo",
            "medium",
            "Add a todo 'File taxes' with High priority.",
            (
                ("type", "textbox", "New todo", "File taxes"),
                ("select", "combobox", "Priority", "High"),
                ("click", "button", "Add"),
            ),
            lambda s: (_todo(s, "File taxes") or {}).get("priority") == "High",
        ),
        GuiTask(
            "clear-two",
            "todo",
            "hard",
            "Mark 'Buy milk' and 'Pay rent' done, then clear the completed todos.",
            (
                ("click", "button", "Mark done: Buy milk"),
                ("click", "button", "Mark done: Pay rent"),
                ("click", "button", "Clear completed"),
            ),
            lambda s: [i["title"] for i in s["todo"].data["items"]] == ["Walk the dog", "Read a book"],
        ),
        GuiTask(
            "swap-dog-for-cat",
            "todo",
            "hard",
            "Delete 'Walk the dog' and add 'Feed the cat' with Low priority.",
            (
                ("click", "button", "Delete: Walk the dog"),
                ("type", "textbox", "New todo", "Feed the cat"),
                ("select", "combobox", "Priority", "Low"),
                ("click", "button", "Add"),
            ),
            lambda s: _todo(s, "Walk the dog") is None and (_todo(s, "Feed the cat") or {}).get("priority") == "Low",
        ),
    ]


def _settings_tasks() -> list[GuiTask]:
    def saved(s: States) -> dict:
        return s["settings"].data["settings"] if s["settings"].data["saves"] else {}

    return [
        GuiTask(
            "save-button",
            "settings",
            "easy",
            "Click the button labelled 'Save settings'.",
            (("click", "button", "Save settings"),),
            lambda s: s["settings"].data["saves"] >= 1,
        ),
        GuiTask(
            "reset-button",
            "settings",
            "easy",
            "Click the button labelled 'Reset to defaults'.",
            (("click", "button", "Reset to defaults"),),
            lambda s: s["settings"].data["resets"] >= 1,
        ),
        GuiTask(
            "danger-link",
            "settings",
            "easy",
            "Click the link labelled 'Danger zone'.",
            (("click", "link", "Danger zone"),),
            lambda s: "/settings/danger" in s["settings"].visits,
        ),
        GuiTask(
            "dark-theme",
            "settings",
            "medium",
            "Switch the theme to Dark and save the settings.",
            (("select", "combobox", "Theme", "Dark"), ("click", "button", "Save settings")),
            lambda s: saved(s).get("theme") == "Dark",
        ),
        GuiTask(
            "rename-sam",
            "settings",
            "medium",
            "Change the display name to Sam and save the settings.",
            (("type", "textbox", "Display name", "Sam"), ("click", "button", "Save settings")),
            lambda s: _same(saved(s).get("display_name"), "Sam"),
        ),
        GuiTask(
            "no-email",
            "settings",
            "medium",
            "Turn off email notifications and save the settings.",
            (("click", "checkbox", "Email notifications"), ("click", "button", "Save settings")),
            lambda s: saved(s).get("email_notifications") is False,
        ),
        GuiTask(
            "german-newsletter",
            "settings",
            "hard",
            "Set the language to German, subscribe to the newsletter and save the settings.",
            (
                ("select", "combobox", "Language", "German"),
                ("click", "checkbox", "Newsletter"),
                ("click", "button", "Save settings"),
            ),
            lambda s: saved(s).get("language") == "German" and saved(s).get("newsletter") is True,
        ),
        GuiTask(
            "delete-account",
            "settings",
            "hard",
            "Delete the account.",
            (
                ("click", "link", "Danger zone"),
                ("click", "checkbox", "I understand this cannot be undone"),
                ("click", "button", "Delete my account"),
            ),
            lambda s: s["settings"].data["account_deleted"],
        ),
    ]


def _shop_tasks() -> list[GuiTask]:
    easy = [
        GuiTask(
            f"add-{sku}",
            "shop",
            "easy",
            f"Click the button labelled 'Add {name} to cart'.",
            (("click", "button", f"Add {name} to cart"),),
            lambda s, k=sku: s["shop"].data["cart"].get(k, 0) >= 1,
        )
        for sku, (name, _) in PRODUCTS.items()
    ]
    checkout = lambda name, address, shipping: (  # noqa: E731
        ("click", "link", "Checkout"),
        ("type", "textbox", "Full name", name),
        ("type", "textbox", "Address", address),
        ("select", "combobox", "Shipping", shipping),
        ("click", "button", "Place order"),
    )
    return easy + [
        GuiTask(
            "cart-link",
            "shop",
            "easy",
            "Click the link labelled 'Cart (0)'.",
            (("click", "link", "Cart (0)"),),
            lambda s: "/shop/cart" in s["shop"].visits,
        ),
        GuiTask(
            "two-mugs",
            "shop",
            "medium",
            "Put two Mugs in the cart.",
            (("click", "button", "Add Mug to cart"), ("click", "button", "Add Mug to cart")),
            lambda s: s["shop"].data["cart"] == {"mug": 2},
        ),
        GuiTask(
            "kettle-coupon",
            "shop",
            "medium",
            "Put a Kettle in the cart and apply the coupon SAVE10.",
            (
                ("click", "button", "Add Kettle to cart"),
                ("click", "link", "Cart (1)"),
                ("type", "textbox", "Coupon code", "SAVE10"),
                ("click", "button", "Apply coupon"),
            ),
            lambda s: s["shop"].data["cart"].get("kettle", 0) >= 1 and s["shop"].data["coupon"] == "SAVE10",
        ),
        GuiTask(
            "teapot-express",
            "shop",
            "hard",
            "Buy a Teapot with Express shipping for Ada Lovelace at 12 Analytical Street.",
            (("click", "button", "Add Teapot to cart"), ("click", "link", "Cart (1)"))
            + checkout("Ada Lovelace", "12 Analytical Street", "Express"),
            lambda s: _order_is(_last_order(s), {"teapot": 1}, "Ada Lovelace", "12 Analytical Street", "Express"),
        ),
        GuiTask(
            "beans-mug-coupon",
            "shop",
            "hard",
            "Buy Coffee beans and a Mug with the coupon SAVE10 and Standard shipping, "
            "for Alan Turing at 1 Bletchley Park.",
            (
                ("click", "button", "Add Coffee beans to cart"),
                ("click", "button", "Add Mug to cart"),
                ("click", "link", "Cart (2)"),
                ("type", "textbox", "Coupon code", "SAVE10"),
                ("click", "button", "Apply coupon"),
            )
            + checkout("Alan Turing", "1 Bletchley Park", "Standard"),
            lambda s: (
                _order_is(_last_order(s), {"beans": 1, "mug": 1}, "Alan Turing", "1 Bletchley Park", "Standard")
                and _last_order(s)["coupon"] == "SAVE10"
            ),
        ),
    ]


def _order_is(order: dict, items: dict, name: str, address: str, shipping: str) -> bool:
    return (
        order.get("items") == items
        and _same(order.get("name"), name)
        and _same(order.get("address"), address)
        and order.get("shipping") == shipping
    )


def goals() -> list[GuiTask]:
    """Every bundled goal, in a fixed order."""
    return _login_tasks() + _todo_tasks() + _settings_tasks() + _shop_tasks()
