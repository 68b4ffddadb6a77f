"""The shop application: a catalogue, a cart with a coupon, and a checkout form that places an order."""

from __future__ import annotations

from agentrl.scaffolds.gui.web_app import (
    AppState,
    Page,
    Redirect,
    WebApp,
    button_form,
    esc,
    money,
    note,
    select,
    text_field,
)

PRODUCTS = {
    "teapot": ("Teapot", 2500),
    "mug": ("Mug", 800),
    "kettle": ("Kettle", 4000),
    "beans": ("Coffee beans", 1200),
    "sampler": ("Tea sampler", 1800),
    "spoons": ("Spoon set", 600),
}
"""sku → (name, price in cents)."""
COUPONS = {"SAVE10": 10}
"""code → percent off."""
SHIPPING = ["Standard", "Express"]


class ShopApp(WebApp):
    name = "shop"
    title = "Shop"

    def initial_state(self) -> AppState:
        return AppState({"cart": {}, "coupon": None, "orders": []})

    def total_cents(self, data: dict) -> int:
        subtotal = sum(PRODUCTS[sku][1] * n for sku, n in data["cart"].items())
        return subtotal * (100 - COUPONS.get(data["coupon"] or "", 0)) // 100

    def get(self, state: AppState, path: list[str], query: dict[str, str]) -> Page | Redirect | None:
        data = state.data
        count = sum(data["cart"].values())
        cart_link = f'<p><a href="{self.url("cart")}">Cart ({count})</a></p>'
        if not path:
            rows = "".join(
                f"<li><span>{esc(name)} {money(price)}</span>"
                f"{button_form(self.url('add', sku), f'Add {name} to cart')}</li>"
                for sku, (name, price) in PRODUCTS.items()
            )
            return "Shop", f"<h1>Shop</h1>{cart_link}<ul>{rows}</ul>"
        if path == ["cart"]:
            rows = "".join(
                f"<li><span>{esc(PRODUCTS[sku][0])} x {n}</span>"
                f"{button_form(self.url('remove', sku), f'Remove {PRODUCTS[sku][0]}')}</li>"
                for sku, n in data["cart"].items()
            )
            coupon = note(f"Coupon {data['coupon']} applied." if data["coupon"] else None)
            bad = note("Unknown coupon." if query.get("coupon") == "bad" else None, "error")
            coupon_form = (
                f'<form method="post" action="{self.url("coupon")}">'
                + text_field("code", "Coupon code")
                + '<button type="submit">Apply coupon</button></form>'
            )
            checkout = f'<p><a href="{self.url("checkout")}">Checkout</a></p>' if data["cart"] else ""
            shop = f'<p><a href="{self.url()}">Continue shopping</a></p>'
            body = (
                f"<ul>{rows}</ul><p>Total: {money(self.total_cents(data))}</p>"
                if rows
                else "<p>Your cart is empty.</p>"
            )
            return "Cart", f"<h1>Cart</h1>{bad}{coupon}{body}{coupon_form}{checkout}{shop}"
        if path == ["checkout"]:
            if not data["cart"]:
                return Redirect(self.url("cart"))
            error = note("Name and address are required." if query.get("error") else None, "error")
            form = (
                f'<form method="post" action="{self.url("order")}">'
                + text_field("name", "Full name")
                + text_field("address", "Address")
                + select("shipping", "Shipping", SHIPPING, "Standard")
                + '<button type="submit">Place order</button></form>'
            )
            return "Checkout", f"<h1>Checkout</h1>{error}<p>Total: {money(self.total_cents(data))}</p>{form}"
        if path == ["done"]:
            return "Order placed", f"<h1>Thank you</h1><p>Order #{len(data['orders'])} placed.</p>{cart_link}"
        return None

    def post(self, state: AppState, path: list[str], form: dict[str, str]) -> Redirect | None:
        data = state.data
        if len(path) == 2 and path[0] in ("add", "remove") and path[1] in PRODUCTS:
            sku = path[1]
            if path[0] == "add":
                data["cart"][sku] = data["cart"].get(sku, 0) + 1
                return Redirect(self.url())
            data["cart"].pop(sku, None)
            return Redirect(self.url("cart"))
        if path == ["coupon"]:
            code = form.get("code", "").strip().upper()
            if code not in COUPONS:
                return Redirect(self.url("cart") + "?coupon=bad")
            data["coupon"] = code
            return Redirect(self.url("cart"))
        if path == ["order"] and data["cart"]:
            name, address = form.get("name", "").strip(), form.get("address", "").strip()
            if not name or not address:
                return Redirect(self.url("checkout") + "?error=1")
            order = {
                "items": dict(data["cart"]),
                "name": name,
                "address": address,
                "shipping": form.get("shipping") if form.get("shipping") in SHIPPING else "Standard",
                "coupon": data["coupon"],
                "total_cents": self.total_cents(data),
            }
            data["orders"].append(order)
            data["cart"], data["coupon"] = {}, None
            return Redirect(self.url("done"))
        return None
