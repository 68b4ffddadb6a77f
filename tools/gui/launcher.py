"""`SharedBrowser`: the one headless chromium of a tool-server process, started on first use.

Playwright objects belong to the event loop that made them, so the browser is kept per running loop: a tool
server has one loop and gets one browser; a test that starts servers in several loops gets one each. Debian's
`/usr/bin/chromium` is launched through `executable_path` (Playwright's own browser downloads are never used);
`AGENTRL_CHROMIUM` points at another binary.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from typing import Any

from agentrl.errors import DependencyError

CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
)
"""The tool server is the isolation boundary (pages only reach allowed loopback origins), so chromium's own
sandbox, which needs user namespaces the tool server may not have, is off."""


def chromium_path() -> str | None:
    """The chromium binary to launch, or None when none is installed."""
    configured = os.environ.get("AGENTRL_CHROMIUM")
    if configured:
        return configured if os.path.exists(configured) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def gui_unavailable_reason() -> str | None:
    """Why the GUI toolset cannot run here (None when it can): no playwright package or no chromium binary."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install 'agentrl[gui]')"
    if chromium_path() is None:
        return "no chromium binary (apt-get install chromium, or set AGENTRL_CHROMIUM)"
    return None


class SharedBrowser:
    """One Playwright driver and chromium per event loop, launched lazily and relaunched if it died."""

    _by_loop: dict[int, tuple[asyncio.AbstractEventLoop, Any, Any]] = {}
    _locks: dict[int, asyncio.Lock] = {}

    @classmethod
    async def get(cls) -> Any:
        """The running loop's `playwright.async_api.Browser`, launching it if needed."""
        loop = asyncio.get_running_loop()
        key = id(loop)
        lock = cls._locks.setdefault(key, asyncio.Lock())
        async with lock:
            entry = cls._by_loop.get(key)
            if entry is not None and entry[0] is loop and entry[2].is_connected():
                return entry[2]
            if entry is not None:
                await _stop(entry[1], entry[2])
            driver, browser = await _launch()
            cls._by_loop[key] = (loop, driver, browser)
            return browser

    @classmethod
    async def close(cls) -> None:
        """Close the running loop's browser (the next `get` launches a new one)."""
        entry = cls._by_loop.pop(id(asyncio.get_running_loop()), None)
        if entry is not None:
            await _stop(entry[1], entry[2])


async def _launch() -> tuple[Any, Any]:
    from playwright.async_api import async_playwright

    reason = gui_unavailable_reason()
    if reason is not None:
        raise DependencyError(f"the GUI toolset cannot start: {reason}")
    driver = await async_playwright().start()
    try:
        browser = await driver.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_ARGS))
    except BaseException:
        await driver.stop()
        raise
    return driver, browser


async def _stop(driver: Any, browser: Any) -> None:
    try:
        await browser.close()
    except Exception:  # already dead: the driver stop below still reaps it
        pass
    try:
        await driver.stop()
    except Exception:
        pass
