"""The `gui` toolset in a real headless chromium, through a real tool server, on the bundled local web apps."""

from __future__ import annotations

import asyncio
import base64
import http.server
import os
import re
import struct
import threading
import zlib

import pytest
import pytest_asyncio
from agentrl.tools.gui.launcher import gui_unavailable_reason

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

if (reason := gui_unavailable_reason()) is not None:
    pytest.skip(f"GUI tests need playwright and chromium: {reason}", allow_module_level=True)

from agentrl.scaffolds.gui.app_server import app_server  # noqa: E402
from agentrl.tools.gui import Browser, ScreenshotBrowser  # noqa: E402
from agentrl.tools.gui.launcher import SharedBrowser  # noqa: E402

from agentrl.toolserver.app import create_app  # noqa: E402
from agentrl.toolserver.client import ToolClient  # noqa: E402
from agentrl.types import ToolCall  # noqa: E402


class QuickBrowser(Browser):
    """Short timeouts, so the timeout test takes a second rather than fifteen."""

    action_timeout_ms = 800
    navigation_timeout_ms = 800


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def tools():
    async with ToolClient(app=create_app([Browser])) as client:
        yield client
    await SharedBrowser.close()


async def call(session, name: str, **arguments):
    return await session.call(ToolCall(id=os.urandom(6).hex(), name=name, arguments=arguments))


def element(observation: str, role: str, name: str) -> int:
    match = re.search(rf'^\[(\d+)\] {role} "{re.escape(name)}"', observation, re.MULTILINE)
    assert match, f"no {role} {name!r} in:\n{observation}"
    return int(match.group(1))


async def start(session, path: str) -> tuple[str, str]:
    """Open a fresh episode of the apps at `path`; returns (episode key, first observation)."""
    server = app_server()
    key = server.new_episode()
    result = await call(session, "navigate", url=server.start_url(key, path))
    assert not result.is_error, result.text
    return key, result.text


async def test_actions_change_the_app_state_and_the_outline_numbers_elements(tools) -> None:
    session = await tools.open_session()
    key, page = await start(session, "/settings")
    assert page.splitlines()[:3] == [f"url: {app_server().origin}/settings", "title: Settings", "# Settings"]
    assert '[2] combobox "Theme" value="Light" options: Light | Dark | System' in page
    assert (await call(session, "observe")).text == page  # numbers are stable while the page lives
    await call(session, "type", id=element(page, "textbox", "Display name"), text="Sam")
    await call(session, "select", id=element(page, "combobox", "Theme"), option="Dark")
    newsletter = await call(session, "click", id=element(page, "checkbox", "Newsletter"))
    assert '"Newsletter" checked' in newsletter.text and 'value="Sam"' in newsletter.text
    saved = await call(session, "click", id=element(page, "button", "Save settings"))
    assert "Settings saved." in saved.text and saved.text.startswith(f"url: {app_server().origin}/settings?saved=1")
    settings = app_server().state(key)["settings"].data["settings"]
    assert (settings["display_name"], settings["theme"], settings["newsletter"]) == ("Sam", "Dark", True)

    danger = await call(session, "click", id=element(saved.text, "link", "Danger zone"))
    assert "# Danger zone" in danger.text
    back = await call(session, "go_back")
    assert "# Settings" in back.text and not back.is_error
    todo = await call(session, "navigate", url=f"{app_server().origin}/todo")
    typed = await call(session, "type", id=element(todo.text, "textbox", "New todo"), text="Call mom", enter=True)
    assert "Call mom (priority normal)" in typed.text
    assert [i["title"] for i in app_server().state(key)["todo"].data["items"]][-1] == "Call mom"
    scrolled = await call(session, "scroll", direction="down")
    pressed = await call(session, "press", key="Tab")
    assert not scrolled.is_error and not pressed.is_error
    await session.close()


async def test_failures_are_typed_tool_errors(tools) -> None:
    session = await tools.open_session()
    _, page = await start(session, "/todo")
    missing = await call(session, "click", id=999)
    assert (missing.is_error, missing.error_type) == (True, "not_found")
    not_a_select = await call(session, "select", id=element(page, "button", "Add"), option="High")
    assert not_a_select.error_type == "bad_arguments"
    no_option = await call(session, "select", id=element(page, "combobox", "Priority"), option="Urgent")
    assert no_option.error_type == "bad_arguments" and "'Low', 'Normal', 'High'" in no_option.text
    bad_key = await call(session, "press", key="NoSuchKey")
    assert bad_key.error_type == "bad_arguments"
    bad_scroll = await call(session, "scroll", direction="sideways")
    assert bad_scroll.error_type == "bad_arguments"
    await session.close()


async def test_elements_can_be_named_by_label(tools) -> None:
    session = await tools.open_session()
    key, page = await start(session, "/settings")
    await call(session, "type", label="Display name", text="Kim")
    await call(session, "select", label="theme", option="System")  # case and spacing aside
    clicked = await call(session, "click", label="Newsletter")
    assert '"Newsletter" checked' in clicked.text and 'value="Kim"' in clicked.text
    await call(session, "click", label="Save settings")
    settings = app_server().state(key)["settings"].data["settings"]
    assert (settings["display_name"], settings["theme"], settings["newsletter"]) == ("Kim", "System", True)

    unknown = await call(session, "click", label="Launch rockets")
    assert (unknown.error_type, "observe()" in unknown.text) == ("not_found", True)
    both = await call(session, "click", id=1, label="Newsletter")
    neither = await call(session, "click")
    assert both.error_type == neither.error_type == "bad_arguments"
    await session.close()


async def test_a_label_two_elements_share_is_refused_not_guessed(tools) -> None:
    browser = Browser()
    server = app_server()
    await browser.navigate.call({"url": server.start_url(server.new_episode(), "/shop")})
    await browser._page.set_content('<h1>Pick</h1><button>Go</button><a href="/shop">Go</a><button>Stay</button>')
    ambiguous = await browser.click.call({"label": "Go"})
    assert ambiguous.error_type == "bad_arguments" and re.search(r"\[\d+\] button; \[\d+\] link", ambiguous.text)
    assert not (await browser.click.call({"label": "Stay"})).is_error
    await browser.close()


async def test_navigation_outside_the_allowed_origins_is_refused(tools) -> None:
    session = await tools.open_session()
    outside = await call(session, "navigate", url="https://example.com/")
    assert (outside.is_error, outside.error_type) == (True, "forbidden")
    scheme = await call(session, "navigate", url="file:///etc/passwd")
    assert scheme.error_type == "forbidden"
    await start(session, "/shop")
    # The first navigation pins the session to the task's origin: another loopback port is now refused too.
    other_port = await call(session, "navigate", url="http://127.0.0.1:9/")
    assert other_port.error_type == "forbidden" and app_server().origin in other_port.text
    assert "# Shop" in (await call(session, "observe")).text
    await session.close()


async def test_fork_shows_the_same_page_then_diverges(tools) -> None:
    session = await tools.open_session()
    key, page = await start(session, "/todo")
    field = element(page, "textbox", "New todo")
    await call(session, "type", id=field, text="unsaved draft")
    await call(session, "select", id=element(page, "combobox", "Priority"), option="High")
    before = (await call(session, "observe")).text
    fork = await session.fork()
    forked = (await call(fork, "observe")).text
    assert forked == before and 'value="unsaved draft"' in forked and 'value="High"' in forked

    await call(fork, "type", id=field, text="only in the fork")
    assert 'value="unsaved draft"' in (await call(session, "observe")).text
    assert 'value="only in the fork"' in (await call(fork, "observe")).text
    shop = await call(fork, "navigate", url=f"{app_server().origin}/shop")
    assert "# Shop" in shop.text and "# Todo list" in (await call(session, "observe")).text
    # The fork carries the episode cookie: it acts on the same application state (server state is shared).
    await call(fork, "click", id=element(shop.text, "button", "Add Mug to cart"))
    assert app_server().state(key)["shop"].data["cart"] == {"mug": 1}
    await fork.close()
    await session.close()


async def test_page_timeouts_and_crashes_become_typed_errors() -> None:
    hanging = _HangingServer()
    try:
        async with ToolClient(app=create_app([QuickBrowser])) as client:
            session = await client.open_session()
            slow = await call(session, "navigate", url=f"{hanging.origin}/")
            assert (slow.is_error, slow.error_type) == (True, "timeout")
            await session.close()

        browser = Browser()
        server = app_server()
        await browser.navigate.call({"url": server.start_url(server.new_episode(), "/shop")})
        cdp = await browser._context.new_cdp_session(browser._page)
        try:
            await asyncio.wait_for(cdp.send("Page.crash"), 2)
        except Exception:  # the crash takes the devtools session down with the page
            pass
        crashed = await browser.observe.call({})
        assert (crashed.is_error, crashed.error_type) == (True, "sandbox_error")
        assert "# Shop" in (await browser.observe.call({})).text  # reopened in the same context and episode
        await browser.close()
    finally:
        hanging.close()
        await SharedBrowser.close()


async def test_screenshot_observation_is_a_valid_png() -> None:
    try:
        async with ToolClient(app=create_app([ScreenshotBrowser])) as client:
            session = await client.open_session()
            _, _ = await start(session, "/shop")
            result = await call(session, "observe")
            await session.close()
    finally:
        await SharedBrowser.close()
    text, image = result.content
    assert text["type"] == "text" and "# Shop" in text["text"] and image["type"] == "image_url"
    url = image["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    png = base64.b64decode(url.removeprefix("data:image/png;base64,"))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1024, 768)
    pixels = _decode_png_rows(png, width, height)
    assert len(set(pixels)) > 1  # something was drawn, not a blank frame


def _decode_png_rows(png: bytes, width: int, height: int) -> list[bytes]:
    """The raw rows of a PNG (IDAT inflated, filter bytes kept): enough to prove it decodes to its stated size."""
    pos, data = 8, b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        if kind == b"IDAT":
            data += png[pos + 8 : pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(data)
    bit_depth, color_type = png[24], png[25]
    channels = {2: 3, 6: 4, 0: 1, 4: 2}[color_type]
    stride = 1 + width * channels * bit_depth // 8
    assert len(raw) == stride * height
    return [raw[k * stride : (k + 1) * stride] for k in range(height)]


class _HangingServer:
    """A loopback server whose pages never finish: the browser's navigation must time out."""

    def __init__(self) -> None:
        release = self.release = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                release.wait(10)

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
