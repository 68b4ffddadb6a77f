"""The pages of the GUI drills: a page model that outlines as the browser tool shows pages, and random pages.

`random_page` draws a title, headings, text lines and numbered elements of the roles the bundled applications
use (buttons, links, checkboxes, text and password boxes, comboboxes), named from a broad vocabulary that holds
the applications' kinds of labels ("Mark done: ...", "Add ... to cart", "Cart (2)") but mostly other words; no
page holds an element that a held-out (`test`) easy task clicks. `agentrl/tiny/build/gui_drills.py` builds its
conversations on them.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

# --- vocabulary -----------------------------------------------------------------------------------------------

_NOUNS = (
    "account address album alert archive article avatar backup badge basket bill billing blog booking bookmark "
    "budget calendar camera campaign card catalogue category channel chart chat checklist city client comment "
    "contact contract course dashboard deadline delivery device discount document domain draft event expense "
    "export feed file filter folder friend gallery guest history inbox invoice issue item job label language "
    "layout library list location log map member menu message milestone note notification order page payment "
    "photo plan playlist post preference price profile project queue receipt recipe record reminder report "
    "request review role room schedule search server session shipment song source status storage subscription "
    "summary survey tag task team template theme ticket timeline topic user video wallet widget workspace "
    "password email username coupon cart product review meeting contact lesson vote reply draft invitation "
    "sensor printer garden library station route trip flight hotel seat ticket table recipe ingredient"
).split()
_VERBS = (
    "Add Apply Approve Archive Assign Book Browse Buy Cancel Change Check Clear Close Compare Confirm Connect "
    "Continue Copy Create Decline Delete Disable Download Duplicate Edit Enable Export Filter Finish Follow "
    "Generate Hide Import Invite Join Leave Load Lock Merge Move Open Pause Pin Post Preview Print Publish "
    "Refresh Reject Reload Remove Rename Reply Report Request Reset Restore Resume Retry Save Search Select Send "
    "Share Show Skip Sort Start Stop Submit Subscribe Sync Undo Unlock Update Upload Verify View Vote"
).split()
_ADJECTIVES = (
    "new old recent active archived shared private public weekly monthly daily open closed pending favourite "
    "hidden upcoming default custom local remote primary secondary main extra quick full short long first last "
    "next previous blue green red yellow small large dark light"
).split()
PAST = {
    "Add": "added", "Apply": "applied", "Approve": "approved", "Archive": "archived", "Assign": "assigned",
    "Book": "booked", "Cancel": "cancelled", "Change": "changed", "Clear": "cleared", "Confirm": "confirmed",
    "Copy": "copied", "Create": "created", "Delete": "deleted", "Disable": "disabled", "Enable": "enabled",
    "Export": "exported", "Import": "imported", "Invite": "invited", "Lock": "locked", "Merge": "merged",
    "Move": "moved", "Pause": "paused", "Pin": "pinned", "Post": "posted", "Publish": "published",
    "Remove": "removed", "Rename": "renamed", "Request": "requested", "Reset": "reset", "Restore": "restored",
    "Save": "saved", "Send": "sent", "Share": "shared", "Submit": "submitted", "Subscribe": "subscribed",
    "Update": "updated", "Upload": "uploaded", "Verify": "verified",
}  # fmt: skip
_CHORES = (
    "Buy bread|Water the plants|Call the bank|Clean the garage|Book a dentist|Fix the bike|Send the invoice|"
    "Renew passport|Wash the car|Plan the trip|Pay the gas bill|Return the books|Feed the fish|Bake a cake|"
    "Write the report|Sort the mail|Mow the lawn|Paint the fence|Order new shoes|Reply to Sam|Charge the laptop|"
    "Back up photos|Cancel the gym|Pick up parcel|Iron shirts|Defrost the freezer|Check the tyres|Buy stamps|"
    "Visit grandma|Learn a song|Tidy the desk|Print tickets|Update the resume|Book a table|Walk to work|"
    "Recycle bottles|Buy coffee|Read the news|Call the plumber|Empty the bins"
).split("|")
_PRODUCTS = (
    "Desk lamp|Notebook|Water bottle|Backpack|Headphones|Phone case|Umbrella|Candle|Tote bag|Frying pan|"
    "Cutting board|Blender|Toaster|Wall clock|Pillow|Blanket|Yoga mat|Sunglasses|Wallet|Keyboard|Mouse pad|"
    "Plant pot|Picture frame|Scarf|Gloves|Socks|T-shirt|Hoodie|Sketchbook|Pencil set|Board game|Puzzle|"
    "Green tea|Olive oil|Dark chocolate|Honey jar|Salad bowl|Wine glass|Travel mug|Lunch box|Bath towel|Soap"
).split("|")
_NAMES = "Ada Alan Grace Linus Maya Omar Priya Sam Lena Kofi Ines Tom Yuki Noah Zoe Ravi Mia Leo Ana Ben".split()
_STATUSES = ("priority low", "priority normal", "priority high", "done", "overdue", "due today", "in progress")
_OPTION_SETS = (
    ("Low", "Normal", "High"),
    ("Small", "Medium", "Large"),
    ("Light", "Dark", "System"),
    ("English", "French", "German", "Spanish"),
    ("Standard", "Express"),
    ("Newest", "Oldest", "Name"),
    ("10", "25", "50", "100"),
    ("Daily", "Weekly", "Monthly"),
    ("Red", "Green", "Blue"),
    ("Public", "Friends", "Private"),
    ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
    ("Card", "Bank transfer", "Cash"),
)
_FIELD_LABELS = (
    "Email|Full name|Username|Address|Phone|City|Search|Title|Message|Subject|Comment|Display name|Company|"
    "Website|Postcode|Nickname|Description|Amount|Quantity|Coupon code|Tag|Note|Country|First name|Last name"
).split("|")
_FIXED_LINKS = (
    "Help|Home|Forgot password?|Need help?|Terms of service|Privacy policy|Contact us|Sign up|Log in|About|"
    "Next page|Previous page|Learn more|Show all|Settings|Profile|Sign out|Create an account|FAQ|Support"
).split("|")
_FIXED_BUTTONS = (
    "Sign in|Sign out|Log in|Save|Cancel|Continue|Next|Back|Submit|OK|Apply|Search|Done|Close|Add|Load more"
).split("|")


def cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def noun(rng: random.Random) -> str:
    return rng.choice(_NOUNS)


def _item(rng: random.Random) -> str:
    return rng.choice(_CHORES) if rng.random() < 0.7 else f"{cap(rng.choice(_ADJECTIVES))} {noun(rng)}"


def _product(rng: random.Random) -> str:
    return rng.choice(_PRODUCTS) if rng.random() < 0.75 else f"{cap(rng.choice(_ADJECTIVES))} {noun(rng)}"


def _by_draw(rng: random.Random, cases: tuple[tuple[float, Callable[[], str]], ...]) -> str:
    """One uniform draw picks the first case whose bound it is below (the last bound is 1); that case makes the
    text."""
    r = rng.random()
    return next(make for bound, make in cases if r < bound)()


def _button_name(rng: random.Random) -> str:
    return _by_draw(
        rng,
        (
            (0.15, lambda: rng.choice(_FIXED_BUTTONS)),
            (0.55, lambda: f"{rng.choice(_VERBS)} {noun(rng)}"),
            (0.7, lambda: f"{rng.choice(_VERBS)} {rng.choice(_ADJECTIVES)} {noun(rng)}s"),
            (0.8, lambda: f"{rng.choice(_VERBS)} to {rng.choice(_ADJECTIVES)}"),
            (0.9, lambda: f"{rng.choice(_VERBS)} all {noun(rng)}s"),
            (1.0, lambda: rng.choice(_VERBS)),
        ),
    )


def _link_name(rng: random.Random) -> str:
    counters = ["cart", "basket", "inbox", "messages", "orders", "alerts"]
    topics = ["settings", "details", "history", "zone", "help", "list"]
    return _by_draw(
        rng,
        (
            (0.25, lambda: rng.choice(_FIXED_LINKS)),
            (0.45, lambda: f"{cap(noun(rng))}s"),
            (0.6, lambda: f"{cap(rng.choice(_ADJECTIVES))} {noun(rng)}s"),
            (0.7, lambda: f"Back to {noun(rng)}s"),
            (0.8, lambda: f"{cap(rng.choice(counters))} ({rng.randint(0, 12)})"),
            (0.9, lambda: f"View all {noun(rng)}s"),
            (1.0, lambda: f"{cap(noun(rng))} {rng.choice(topics)}"),
        ),
    )


def _checkbox_name(rng: random.Random) -> str:
    return rng.choice(
        [
            f"{cap(noun(rng))} notifications",
            f"Show {rng.choice(_ADJECTIVES)} {noun(rng)}s",
            f"Remember {rng.choice(['me', 'this device', 'my choice'])}",
            f"I agree to the {noun(rng)} terms",
            f"Email me about {noun(rng)}s",
            "Keep me signed in",
            cap(noun(rng)),
            f"Make {noun(rng)} {rng.choice(['public', 'private', 'default'])}",
        ]
    )


# --- pages ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Element:
    """An interactive element; `group` ties it to the list item (text line and buttons) it belongs to."""

    role: str
    name: str
    extra: str = ""
    group: int | None = None


@dataclass(frozen=True)
class Text:
    text: str
    group: int | None = None


Block = Element | Text


@dataclass(frozen=True)
class Page:
    path: str
    title: str
    blocks: tuple[Block, ...]

    @property
    def elements(self) -> list[Element]:
        return [b for b in self.blocks if isinstance(b, Element)]


def outline(page: Page, port: int) -> str:
    """The page as the browser tool shows it: url, title, then one line per block, elements numbered 1..n."""
    lines = [f"url: http://127.0.0.1:{port}{page.path}", f"title: {page.title}"]
    number = 0
    for block in page.blocks:
        if isinstance(block, Text):
            lines.append(block.text)
        else:
            number += 1
            lines.append(f"[{number}] {block.role} {json.dumps(block.name, ensure_ascii=False)}{block.extra}")
    return "\n".join(lines)


@functools.cache
def held_out_targets() -> frozenset[tuple[str, str]]:
    """(role, name) of every element a held-out easy task clicks: no drill page holds one."""
    from agentrl.scaffolds.gui.tasks import tasks

    return frozenset(
        (step[1], step[2])
        for task in tasks("test")
        if task.metadata["tier"] == "easy"
        for step in task.metadata["steps"]
    )


class _Builder:
    """Blocks of one page, each element's (role, name) unique and none a held-out target."""

    def __init__(self, rng: random.Random, budget: int):
        self.rng, self.budget = rng, budget
        self.blocks: list[Block] = []
        self.seen: set[tuple[str, str]] = set()
        self.groups = 0

    def element(self, role: str, name: str, extra: str = "", group: int | None = None) -> bool:
        key = (role, name)
        if self.budget <= 0 or key in self.seen or key in held_out_targets():
            return False
        self.seen.add(key)
        self.blocks.append(Element(role, name, extra, group))
        self.budget -= 1
        return True

    def text(self, text: str, group: int | None = None) -> None:
        self.blocks.append(Text(text, group))

    def group(self) -> int:
        self.groups += 1
        return self.groups


def _field(b: _Builder) -> None:
    rng = b.rng
    kind = rng.choices(["textbox", "password", "checkbox", "combobox"], weights=[5, 1.5, 2.5, 2])[0]
    if kind == "textbox":
        label = rng.choice(_FIELD_LABELS) if rng.random() < 0.6 else f"{cap(rng.choice(_ADJECTIVES))} {noun(rng)}"
        value = "" if rng.random() < 0.7 else rng.choice(_NAMES + _NOUNS)
        b.element("textbox", label, f" value={json.dumps(value)}")
    elif kind == "password":
        label = rng.choice(["Password", "Current password", "New password", "Confirm password", "PIN"])
        b.element("password", label, ' value=""')
    elif kind == "checkbox":
        b.element("checkbox", _checkbox_name(rng), rng.choice([" checked", " unchecked"]))
    else:
        options = rng.choice(_OPTION_SETS)
        label = rng.choice(["Priority", "Size", "Theme", "Language", "Shipping", "Sort by", "Show", "Repeat"])
        if rng.random() < 0.5:
            label = cap(noun(rng))
        chosen = rng.choice(options)
        b.element("combobox", label, f" value={json.dumps(chosen)} options: {' | '.join(options)}")


def _list_section(b: _Builder) -> None:
    """Todo-like rows: a text line per item and one or two buttons naming it."""
    rng = b.rng
    actions = rng.choice(
        [
            ("Mark done: {}", "Delete: {}"),
            ("Mark done: {}",),
            ("Delete: {}",),
            ("Edit: {}", "Remove: {}"),
            ("Archive: {}", "Delete: {}"),
            ("Open: {}",),
            ("Accept: {}", "Decline: {}"),
            ("Pin: {}", "Remove: {}"),
            ("Start: {}", "Skip: {}"),
            ("Move up: {}", "Move down: {}"),
        ]
    )
    with_status = rng.random() < 0.7
    for _ in range(rng.randint(2, 5)):
        if b.budget <= 0:
            return
        item, group = _item(rng), b.group()
        if any(("button", action.format(item)) in b.seen for action in actions):
            continue
        b.text(f"{item} ({rng.choice(_STATUSES)})" if with_status else item, group)
        for action in actions:
            b.element("button", action.format(item), group=group)


def _catalogue_section(b: _Builder) -> None:
    """Shop-like rows: a product and its price, and a button adding it."""
    rng = b.rng
    pattern = rng.choice(["Add {} to cart", "Add {} to cart", "Add {} to basket", "Buy {}", "Add to cart: {}"])
    if rng.random() < 0.5:
        b.element("link", f"{rng.choice(['Cart', 'Basket', 'Bag'])} ({rng.randint(0, 9)})")
    for _ in range(rng.randint(2, 6)):
        if b.budget <= 0:
            return
        product, group = _product(rng), b.group()
        if ("button", pattern.format(product)) in b.seen:
            continue
        b.text(f"{product} ${rng.randint(1, 99)}.{rng.choice(['00', '50', '99', '25', '95'])}", group)
        b.element("button", pattern.format(product), group=group)


def _form_section(b: _Builder) -> None:
    """Login/settings-like: a few fields and the button that submits them."""
    rng = b.rng
    for _ in range(rng.randint(1, 4)):
        _field(b)
    b.element("button", _button_name(rng))


def _links_section(b: _Builder) -> None:
    for _ in range(b.rng.randint(1, 3)):
        b.element("link", _link_name(b.rng))


def _buttons_section(b: _Builder) -> None:
    for _ in range(b.rng.randint(1, 3)):
        b.element("button", _button_name(b.rng))


def _text_section(b: _Builder) -> None:
    rng = b.rng
    line = rng.choice(
        [
            f"## {cap(rng.choice(_ADJECTIVES))} {noun(rng)}s",
            f"## {cap(noun(rng))}",
            f"Signed in as {rng.choice(_NAMES).lower()}",
            f"Total: ${rng.randint(1, 400)}.{rng.randint(0, 99):02d}",
            f"{rng.randint(0, 40)} {noun(rng)}s",
            "Nothing to do.",
            f"Last updated {rng.randint(1, 28)} {rng.choice(['Jan', 'Mar', 'May', 'Jul', 'Sep', 'Nov'])}",
            f"Your {noun(rng)} is empty.",
            f"Welcome back, {rng.choice(_NAMES)}",
        ]
    )
    b.text(line)


_SECTIONS = (
    (_list_section, 2.0),
    (_catalogue_section, 1.5),
    (_form_section, 2.5),
    (_links_section, 2.0),
    (_buttons_section, 2.0),
    (_text_section, 1.5),
)


def _title(rng: random.Random) -> str:
    return rng.choice(
        [
            f"{cap(noun(rng))}s",
            f"My {noun(rng)}s",
            f"{cap(noun(rng))} settings",
            f"{cap(rng.choice(_ADJECTIVES))} {noun(rng)}s",
            f"Edit {noun(rng)}",
            f"{cap(noun(rng))} list",
            cap(noun(rng)),
        ]
    )


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "page"


def random_page(rng: random.Random, n_elements: int | None = None, *, path: str | None = None) -> Page:
    """A page with `n_elements` (default 3-12) numbered elements, a title and a heading, and some text."""
    budget = n_elements if n_elements is not None else rng.randint(3, 12)
    title = _title(rng)
    b = _Builder(rng, budget)
    b.text(f"# {title if rng.random() < 0.8 else _title(rng)}")
    if rng.random() < 0.15:
        b.text(f"{cap(noun(rng))} {rng.choice(list(PAST.values()))}.")
    functions, weights = zip(*_SECTIONS, strict=True)
    for _ in range(40):
        if b.budget <= 0:
            break
        rng.choices(functions, weights=weights)[0](b)
    if path is None:
        path = "/" + slug(title if rng.random() < 0.5 else noun(rng))
        if rng.random() < 0.3:
            path += "/" + slug(noun(rng))
    return Page(path, title, tuple(b.blocks))
