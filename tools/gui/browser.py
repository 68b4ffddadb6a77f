"""`Browser`: a headless chromium page per session, driven by numbered elements of its text outline.

One chromium serves the whole tool server (`SharedBrowser`); each session gets its own isolated
`BrowserContext` (cookies, storage, cache), opened on the session's first call and closed with the session.
Every action returns the page's new outline (see `page_snapshot.py`); `ScreenshotBrowser` adds a PNG of the
viewport as an image content part. Actions on an element name it by its number in the outline or by its label
(`click(label="Sign in")`): a label matches exactly, else ignoring case and spacing; one that no element or
several elements carry is an error naming the candidates.

Origins: pages may load only from origins matching `AGENTRL_GUI_ALLOWED_ORIGINS` (comma-separated, `*` as a
wildcard; default: any port on 127.0.0.1 and localhost). The first `navigate` of a session pins it to that
origin: later navigations, links and subresources elsewhere are refused (`forbidden`). Failures are typed:
an unknown element id is `not_found`, a page that does not answer in time `timeout`, a crashed or closed page
`sandbox_error` (the next call reopens the page at its last address).

Fork copies the context's cookies and local storage into a new context, reloads the current address there and
re-applies element numbers, form values and scroll position. It does not copy the back/forward history,
sessionStorage, or JavaScript state other than the form fields; a page that was the answer to a POST is fetched
again with GET; state kept on the application's server is shared by the fork and its parent.
"""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import os
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from agentrl.tools.gui.launcher import SharedBrowser
from agentrl.tools.gui.page_snapshot import (
    CAPTURE_JS,
    ID_ATTRIBUTE,
    RESTORE_JS,
    SNAPSHOT_JS,
    format_snapshot,
    outline_elements,
)

from agentrl.errors import ToolError
from agentrl.tool import tool

DEFAULT_ALLOWED_ORIGINS = "http://127.0.0.1:*,http://localhost:*"
ACTION_TIMEOUT_MS = 5_000
NAVIGATION_TIMEOUT_MS = 15_000
MAX_OUTLINE_LINES = 300
VIEWPORT = {"width": 1024, "height": 768}
_OPTIONS_JS = "e => e.options ? Array.from(e.options, o => [o.text.trim(), o.value]) : null"


def allowed_origin_patterns() -> tuple[str, ...]:
    raw = os.environ.get("AGENTRL_GUI_ALLOWED_ORIGINS", DEFAULT_ALLOWED_ORIGINS)
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class Browser:
    """Tools: `observe`, `click`, `type`, `select`, `scroll`, `press`, `go_back`, `navigate`."""

    serial = True
    action_timeout_ms = ACTION_TIMEOUT_MS
    """How long a click, type or select waits for its element to be ready."""
    navigation_timeout_ms = NAVIGATION_TIMEOUT_MS
    """How long a page may take to load."""
    screenshots = False
    """Whether every observation also carries a PNG screenshot of the viewport (`ScreenshotBrowser`)."""

    def __init__(self) -> None:
        self.patterns = allowed_origin_patterns()
        self.pinned: set[str] = set()
        self._context: Any = None
        self._page: Any = None
        self._crashed = False
        self._last_url = "about:blank"

    @classmethod
    async def setup(cls) -> None:
        # Launch at server start, so a missing chromium fails the first session loudly rather than every call.
        await SharedBrowser.get()

    @classmethod
    async def teardown(cls) -> None:
        # chromium and the Playwright driver are processes of their own: a stopped server must not leave them
        await SharedBrowser.close()

    # --- tools -------------------------------------------------------------------------------------------

    @tool
    async def observe(self) -> Any:
        """Show the current page: its address, title and an outline in which every element you can act on has a
        number in brackets, e.g. `[3] button "Save"`. Use these numbers (or the quoted labels) with click, type
        and select."""
        page = await self._live_page()
        return await self._observation(page)

    @tool
    async def click(
        self,
        id: Annotated[int | None, "The number of the element, from the page outline."] = None,
        label: Annotated[str | None, "Instead of a number: the element's label, as the outline quotes it."] = None,
    ) -> Any:
        """Click an element of the page and show the page afterwards."""
        page = await self._live_page()
        element = await self._target(page, id, label)
        await self._act(page, lambda: element.click())
        return await self._observation(page)

    @tool(name="type")
    async def type_text(
        self,
        id: Annotated[int | None, "The number of a text field, from the page outline."] = None,
        *,
        text: Annotated[str, "The text to put in the field (replaces what the field held)."],
        label: Annotated[str | None, "Instead of a number: the field's label, as the outline quotes it."] = None,
        enter: Annotated[bool, "Press Enter afterwards (submits most forms)."] = False,
    ) -> Any:
        """Type text into a field of the page and show the page afterwards."""
        page = await self._live_page()
        element = await self._target(page, id, label)
        await self._act(page, lambda: element.fill(text))
        if enter:
            await self._act(page, lambda: element.press("Enter"))
        return await self._observation(page)

    @tool
    async def select(
        self,
        id: Annotated[int | None, "The number of a drop-down (combobox), from the page outline."] = None,
        *,
        option: Annotated[str, "The option to choose, by its visible text (or its value)."],
        label: Annotated[str | None, "Instead of a number: the drop-down's label, as the outline quotes it."] = None,
    ) -> Any:
        """Choose an option of a drop-down and show the page afterwards."""
        page = await self._live_page()
        element = await self._target(page, id, label)
        named = f"[{id}]" if id is not None else repr(label)
        options = await self._act(page, lambda: element.evaluate(_OPTIONS_JS))
        if options is None:
            raise ToolError(f"element {named} is not a drop-down", error_type="bad_arguments")
        index = next((k for k, (text, value) in enumerate(options) if option.strip() in (text, value)), None)
        if index is None:
            names = ", ".join(repr(text) for text, _ in options)
            raise ToolError(f"element {named} has no option {option!r}; options: {names}", error_type="bad_arguments")
        await self._act(page, lambda: element.select_option(index=index))
        return await self._observation(page)

    @tool
    async def scroll(self, direction: Annotated[Literal["up", "down", "left", "right"], "Where to scroll."]) -> Any:
        """Scroll the page by most of a screen and show it afterwards."""
        page = await self._live_page()
        dx, dy = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}[direction]
        script = f"() => window.scrollBy({dx} * window.innerWidth * 0.8, {dy} * window.innerHeight * 0.8)"
        await self._act(page, lambda: page.evaluate(script))
        return await self._observation(page)

    @tool
    async def press(self, key: Annotated[str, "A key name such as Enter, Tab, Escape, ArrowDown or Control+A."]) -> Any:
        """Press a key on the focused element and show the page afterwards."""
        page = await self._live_page()
        await self._act(page, lambda: page.keyboard.press(key), bad_input="unknown key")
        return await self._observation(page)

    @tool
    async def go_back(self) -> Any:
        """Go back to the previous page in the history and show it."""
        page = await self._live_page()
        if await self._act(page, lambda: page.go_back(timeout=self.navigation_timeout_ms)) is None:
            raise ToolError("there is no previous page in this tab's history", error_type="not_found")
        return await self._observation(page)

    @tool
    async def navigate(self, url: Annotated[str, "An absolute http(s) address of an allowed origin."]) -> Any:
        """Open an address in the browser and show the page."""
        origin = origin_of(url)
        if urlsplit(url).scheme not in ("http", "https") or not self._allowed(origin):
            allowed = ", ".join(sorted(self.pinned)) if self.pinned else ", ".join(self.patterns)
            raise ToolError(
                f"navigation to {origin or url!r} is not allowed; allowed: {allowed}", error_type="forbidden"
            )
        page = await self._live_page()
        self.pinned.add(origin)
        await self._act(page, lambda: page.goto(url, timeout=self.navigation_timeout_ms))
        return await self._observation(page)

    # --- session lifecycle -------------------------------------------------------------------------------

    async def fork(self) -> Browser:
        """A new session showing the same page: see the module docstring for what is and is not copied."""
        forked = type(self)()
        forked.pinned = set(self.pinned)
        if self._page is None or self._crashed:
            forked._last_url = self._last_url
            return forked
        state = await self._context.storage_state()
        captured = await self._page.evaluate(CAPTURE_JS)
        page = await forked._open(storage_state=state)
        if self._page.url != "about:blank":
            await page.goto(self._page.url, timeout=self.navigation_timeout_ms)
            await page.evaluate(RESTORE_JS, captured)
        return forked

    async def close(self) -> None:
        if self._context is not None:
            context, self._context, self._page = self._context, None, None
            try:
                await context.close()
            except Exception:  # the browser went away first; nothing is left to close
                pass

    # --- helpers -----------------------------------------------------------------------------------------

    def _allowed(self, origin: str) -> bool:
        if self.pinned:
            return origin in self.pinned
        return any(fnmatch.fnmatchcase(origin, pattern) for pattern in self.patterns)

    async def _open(self, storage_state: Any = None) -> Any:
        browser = await SharedBrowser.get()
        self._context = await browser.new_context(
            viewport=VIEWPORT, storage_state=storage_state, service_workers="block"
        )
        self._context.set_default_timeout(self.action_timeout_ms)
        self._context.set_default_navigation_timeout(self.navigation_timeout_ms)
        await self._context.route("**/*", self._route)
        return await self._new_page()

    async def _new_page(self) -> Any:
        self._page = await self._context.new_page()
        self._page.on("crash", self._on_crash)
        self._crashed = False
        return self._page

    async def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(("data:", "about:", "blob:")) or self._allowed(origin_of(url)):
            await route.continue_()
        else:
            await route.abort("blockedbyclient")

    def _on_crash(self, page: Any) -> None:
        self._crashed = True

    async def _live_page(self) -> Any:
        """The session's page; after a crash, report it once and reopen the page at its last address."""
        if self._page is not None and not self._crashed and not self._page.is_closed():
            return self._page
        if self._context is None:
            return await self._open()
        crashed = self._page
        try:
            page = await self._new_page()  # same context: the cookies (and so the app's session) survive
        except Exception:  # the context or the whole browser is gone: start over in a new context
            await self.close()
            page = await self._open()
        if crashed is not None and crashed is not page:
            try:
                await crashed.close()
            except Exception:  # a crashed page may refuse even to close
                pass
        if self._last_url != "about:blank":
            try:
                await page.goto(self._last_url, timeout=self.navigation_timeout_ms)
            except Exception:  # the page that crashed may not load again; the agent starts from a blank tab
                pass
        raise ToolError(
            f"the page crashed and was reopened at {page.url}; observe() to continue", error_type="sandbox_error"
        )

    async def _target(self, page: Any, id: int | None, label: str | None) -> Any:
        """The element an action names, by its number or by its label (exactly one of the two)."""
        if (id is None) == (label is None):
            message = "name the element by its number (id) or by its label, one of them"
            raise ToolError(message, error_type="bad_arguments")
        if id is None:
            id = await self._labelled(page, label)
        locator = page.locator(f"[{ID_ATTRIBUTE}='{int(id)}']")
        if await self._act(page, lambda: locator.count()) == 0:
            raise ToolError(
                f"no element [{id}] on this page; observe() shows the current numbers", error_type="not_found"
            )
        return locator.first

    async def _labelled(self, page: Any, label: str) -> int:
        """The number of the one element whose label is `label` (exact, else ignoring case and spacing)."""
        snapshot = await self._act(page, lambda: page.evaluate(SNAPSHOT_JS, MAX_OUTLINE_LINES))
        elements = outline_elements("\n".join(snapshot["lines"]))
        wanted = " ".join(label.split())
        found = [e for e in elements if e.name == wanted] or [
            e for e in elements if e.name.casefold() == wanted.casefold()
        ]
        if not found:
            raise ToolError(
                f"no element labelled {label!r} on this page; observe() shows the labels", error_type="not_found"
            )
        if len(found) > 1:
            which = "; ".join(f"[{e.id}] {e.role}" for e in found)
            raise ToolError(
                f"{len(found)} elements are labelled {label!r} ({which}): use the number", error_type="bad_arguments"
            )
        return found[0].id

    async def _act(self, page: Any, action: Any, bad_input: str | None = None) -> Any:
        """Run one Playwright action with its failures turned into typed tool errors."""
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        # A page whose script never yields blocks even `evaluate`, which has no timeout of its own.
        limit_s = (self.navigation_timeout_ms + self.action_timeout_ms) / 1000
        try:
            async with asyncio.timeout(limit_s):
                return await action()
        except TimeoutError:
            raise ToolError(f"the page did not answer within {limit_s:g}s", error_type="timeout") from None
        except PlaywrightTimeout as exc:
            raise ToolError(_first_line(exc), error_type="timeout") from None
        except PlaywrightError as exc:
            message = _first_line(exc)
            if self._crashed or page.is_closed() or "crash" in message.lower() or "closed" in message.lower():
                self._crashed = True
                raise ToolError(f"the page crashed: {message}", error_type="sandbox_error") from None
            if bad_input and "unknown key" in message.lower():
                raise ToolError(message, error_type="bad_arguments") from None
            if "ERR_BLOCKED_BY_CLIENT" in message:
                raise ToolError(
                    f"the page tried to leave the allowed origins: {message}", error_type="forbidden"
                ) from None
            raise ToolError(message, error_type="failed") from None

    async def _observation(self, page: Any) -> Any:
        try:
            await page.wait_for_load_state("domcontentloaded", timeout=self.navigation_timeout_ms)
        except Exception:  # a page that never finishes loading is still observed as it is
            pass
        if page.url != "about:blank":
            self._last_url = page.url
        snapshot = await self._act(page, lambda: page.evaluate(SNAPSHOT_JS, MAX_OUTLINE_LINES))
        title = await self._act(page, lambda: page.title())
        text = format_snapshot(page.url, title, snapshot)
        if not self.screenshots:
            return text
        png = await self._act(page, lambda: page.screenshot(type="png"))
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}}
        return [{"type": "text", "text": text}, image]


class ScreenshotBrowser(Browser):
    """`Browser` whose observations also carry a PNG screenshot of the viewport, for vision models."""

    screenshots = True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
