"""Synthetic drills for the GUI scaffold's easy tier: warm-starting a small policy on one-click goals.

An easy goal is "Click the <role> labelled '<name>'." on a page whose outline numbers its interactive elements;
solving it means calling `click` on that element, by its number in the outline or by its label. The drills click
by label, which a small policy learns by copying the goal's quoted name (looking a number up in the outline takes
more than its few layers learn from a warm start). The tiny policy sees
no tool schemas, so it learns the tool and the numbering from demonstrations alone, and the few bundled easy
tasks would teach it their pages rather than the skill. A drill therefore draws a page at random: a title,
headings, text lines and 3-12 numbered elements of the roles the bundled applications use, named from a broad
vocabulary that holds the applications' kinds of labels ("Mark done: ...", "Add ... to cart", "Cart (2)") but
mostly other words, so the only way to the right number is to look the label up. The conversation has the format
of a real episode: the scaffold's system prompt, the goal and the start page's outline as the user message, one
`click(label=...)`, the outline of the page it leads to as the tool's reply, and `done`.

The bundled tasks are never used for drills, and no drill's page holds an element that a held-out (`test`) easy
task names, so those tasks stay unseen.

With probability `mistake_rate` a drill is deliberately wrong, so the warm-started policy is imperfect and RL has
something to fix:

- `neighbour`: clicks the element numbered next to the right one, then says done;
- `random`: clicks another element chosen at random, then says done;
- `give_up`: answers done at once without acting.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import replace
from typing import Any

from agentrl.scaffolds.demonstration import tool_call_messages
from agentrl.scaffolds.gui.tasks import SYSTEM_PROMPT
from agentrl.tiny.build.gui_pages import (
    PAST,
    Element,
    Page,
    Text,
    cap,
    held_out_targets,
    noun,
    outline,
    random_page,
    slug,
)

MISTAKES = {"neighbour": 0.35, "random": 0.25, "give_up": 0.4}
"""Relative frequency of each kind of mistake."""
MAX_OUTLINE_CHARS = 650
"""Longest start-page outline a drill shows: a little over the longest bundled start page (the todo list, about
580 characters). The page a click leads to is at most a note line longer, so a whole drill renders to about as
many characters as a real easy episode on the todo list."""
TARGET_ROLES = {"button": 0.6, "link": 0.35, "checkbox": 0.05}
"""How often each role is the one the goal names (the bundled easy goals name buttons and links)."""


# --- clicks ---------------------------------------------------------------------------------------------------


def _new_page(rng: random.Random, page: Page, name: str) -> Page:
    """Where a link (or a navigating button) leads: a short page under the same application."""
    app = page.path.split("/")[1] if rng.random() < 0.7 else slug(noun(rng))
    clean = re.sub(r"\s*\(\d+\)$", "", name).rstrip("?:.!") or noun(rng)
    target = random_page(rng, rng.randint(1, 5), path=f"/{app}/{slug(clean)}")
    title = cap(clean) if rng.random() < 0.7 else target.title
    blocks = (Text(f"# {title}"), *target.blocks[1:])
    back = ("link", f"Back to {page.title.lower()}")
    taken = {(e.role, e.name) for e in target.elements} | held_out_targets()
    if rng.random() < 0.3 and back not in taken:
        blocks += (Element(*back),)
    return Page(target.path, title, blocks)


def _toggled(block: Element) -> Element:
    extra = " unchecked" if block.extra == " checked" else " checked"
    return replace(block, extra=extra)


def after_click(rng: random.Random, page: Page, number: int) -> Page:
    """The page a click on element `number` (1-based) shows next, as the bundled applications behave: a
    checkbox toggles in place, a link opens a new page, a button posts and usually reloads the same page."""
    clicked = page.elements[number - 1]
    if clicked.role == "checkbox":
        return replace(page, blocks=tuple(_toggled(b) if b is clicked else b for b in page.blocks))
    if clicked.role != "button" or rng.random() < 0.3:
        return _new_page(rng, page, clicked.name)
    blocks = list(page.blocks)
    name = clicked.name
    note: str | None = None
    if re.match(r"(Delete|Remove|Archive):? ", name) and clicked.group is not None:
        blocks = [b for b in blocks if b.group != clicked.group]
    elif name.startswith("Mark done: "):
        done = replace(clicked, name="Mark not done: " + name[len("Mark done: ") :])
        blocks = [done if b is clicked else b for b in blocks]
        blocks = [
            Text(re.sub(r" \([^)]*\)$", "", b.text) + " (done)", b.group)
            if isinstance(b, Text) and b.group == clicked.group and b.group is not None
            else b
            for b in blocks
        ]
    elif " to cart" in name or " to basket" in name or name.startswith(("Buy ", "Add to cart")):
        counter = re.compile(r"^(Cart|Basket|Bag) \((\d+)\)$")
        blocks = [
            replace(b, name=counter.sub(lambda m: f"{m.group(1)} ({int(m.group(2)) + 1})", b.name))
            if isinstance(b, Element) and b.role == "link" and counter.match(b.name)
            else b
            for b in blocks
        ]
    else:
        verb, _, rest = name.partition(" ")
        past = PAST.get(verb.rstrip(":"))
        if past is not None:
            note = f"{cap(rest)} {past}." if rest else f"{cap(past)}."
    path = page.path
    if note is not None:
        blocks.insert(1, Text(note))
        if rng.random() < 0.3:
            path += f"?{slug(note).split('-')[-1]}=1"
    # a redirect loads a new document: numbering starts from 1 again, and no held-out label appears
    blocks = [b for b in blocks if not (isinstance(b, Element) and (b.role, b.name) in held_out_targets())]
    return Page(path, page.title, tuple(blocks))


# --- conversations --------------------------------------------------------------------------------------------


def goal_text(role: str, name: str) -> str:
    """The easy tier's goal phrasing."""
    return f"Click the {role} labelled '{name}'."


def _pick_target(rng: random.Random, page: Page) -> int | None:
    """The 1-based number of the element the goal names, by `TARGET_ROLES`; None if the page has none."""
    elements = page.elements
    roles = [r for r in TARGET_ROLES if any(e.role == r for e in elements)]
    if not roles:
        return None
    role = rng.choices(roles, weights=[TARGET_ROLES[r] for r in roles])[0]
    # the goal quotes the name in single quotes: a name with one would be ambiguous; and a click by label needs the
    # label to name one element of the page
    labels = Counter(e.name.casefold() for e in elements)
    numbers = [
        k for k, e in enumerate(elements, 1) if e.role == role and "'" not in e.name and labels[e.name.casefold()] == 1
    ]
    return rng.choice(numbers) if numbers else None


def _start(rng: random.Random) -> tuple[Page, int, int]:
    """A start page no longer than `MAX_OUTLINE_CHARS`, the number of its target element, and the port."""
    port = rng.randint(32768, 60999)
    while True:
        page = random_page(rng)
        if len(page.elements) < 3 or len(outline(page, port)) > MAX_OUTLINE_CHARS:
            continue
        target = _pick_target(rng, page)
        if target is not None:
            return page, target, port


def _wrong_number(rng: random.Random, kind: str, target: int, page: Page) -> int:
    """Another element to click by mistake, one whose label names only it (a click by label reaches it)."""
    labels = Counter(e.name.casefold() for e in page.elements)
    clickable = [k for k, e in enumerate(page.elements, 1) if k != target and labels[e.name.casefold()] == 1]
    near = [k for k in (target - 1, target + 1) if k in clickable]
    if kind == "neighbour" and near:
        return rng.choice(near)
    return rng.choice(clickable) if clickable else target


def demonstration(rng: random.Random, *, mistake_rate: float) -> list[dict[str, Any]]:
    """One easy-tier drill (OpenAI message dicts), deliberately wrong with probability `mistake_rate`."""
    page, target, port = _start(rng)
    element = page.elements[target - 1]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"{goal_text(element.role, element.name)}\n\n{outline(page, port)}"},
    ]
    mistake = rng.choices(list(MISTAKES), weights=list(MISTAKES.values()))[0] if rng.random() < mistake_rate else None
    if mistake == "give_up":
        messages.append({"role": "assistant", "content": "done"})
        return messages
    number = target if mistake is None else _wrong_number(rng, mistake, target, page)
    result = outline(after_click(rng, page, number), port)
    label = page.elements[number - 1].name
    messages += tool_call_messages("click", {"label": label}, result, call_id="call_0_0")
    messages.append({"role": "assistant", "content": "done"})
    return messages
