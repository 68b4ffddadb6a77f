"""`GuiScaffold`: ReAct over the bundled web applications, driven through the `gui` browser toolset.

An episode starts a fresh copy of the applications on the `AppServer`, opens the tool session and navigates it
to the task's start page (`open_episode`). In `run` that happens before the first policy turn and the start
page's outline is part of the user message, so even a one-click goal takes one turn; episodes whose messages are
built before the session opens (native tool calls in `agentrl eval`) are told to `observe` first. After the last
turn `finish_episode` runs the task's checker on the episode's application state; its outcome is the
trajectory's `gui_check` component, which the `gui_check` reward reads.

Forking an episode's session (ARPO/AEPO branches) also forks the application state: the branch's browser is
moved to a copy of the state at that moment and reloads the same page. Form values typed but not yet submitted
are not carried into the branch (the page is loaded again from the server).

`observation="screenshot"` serves `ScreenshotBrowser`, whose results carry a PNG of the page as an image
content part next to the outline.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from agentrl.scaffolds.gui.app_server import app_server
from agentrl.scaffolds.gui.checker import CHECK_COMPONENT
from agentrl.scaffolds.gui.tasks import check
from agentrl.scaffolds.react import ReactScaffold

from agentrl.config import RolloutConfig
from agentrl.errors import InfraError, TaskSetupError
from agentrl.protocols import Policy, ToolBackend, ToolSession
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory

DEFAULT_ROLLOUT = RolloutConfig(max_turns=12, max_new_tokens_per_turn=64, max_tokens_per_episode=8192)
"""Used when no rollout config is given: hard tasks take up to ten actions, and each outline is a few hundred
tokens."""
OBSERVATIONS = ("text", "screenshot")
OBSERVE_FIRST = "The browser shows the start page: call observe to see it."

MAX_CONCURRENT_STARTS = 4
"""Episodes that open their start page at once (per event loop); the others wait their turn. One chromium loading
dozens of new pages at once on a small machine misses the page-load limit for every one of them."""
_start_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _start_slot() -> asyncio.Semaphore:
    """This event loop's semaphore over start pages (one per loop: a semaphore belongs to the loop it waits on)."""
    loop = asyncio.get_running_loop()
    slots = _start_slots.get(loop)
    if slots is None:
        slots = _start_slots[loop] = asyncio.Semaphore(MAX_CONCURRENT_STARTS)
    return slots


_opened: contextvars.ContextVar[tuple[EpisodeSession, str] | None] = contextvars.ContextVar("gui_opened", default=None)


class GuiScaffold(ReactScaffold):
    """Web tasks with a checker of the application state; reward: `gui_check`."""

    name = "gui"

    def __init__(self, *, rollout: RolloutConfig | None = None, observation: str = "text"):
        from agentrl.scaffolds.gui import tasks
        from agentrl.tools.gui import Browser, ScreenshotBrowser

        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {OBSERVATIONS}, not {observation!r}")
        self.observation = observation
        super().__init__(
            tools=[ScreenshotBrowser if observation == "screenshot" else Browser],
            tasks=tasks.tasks,
            system_prompt=tasks.SYSTEM_PROMPT,
            rewards=(CHECK_COMPONENT,),
            rollout=rollout or DEFAULT_ROLLOUT,
        )

    def initial_messages(self, task: Task) -> list[dict[str, Any]]:
        opened = _opened.get()
        page = opened[1] if opened is not None else OBSERVE_FIRST
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": f"{task.prompt}\n\n{page}"},
        ]

    async def run(
        self, task: Task, policy: Policy, tools: ToolBackend, *, group_id: str, trajectory_id: str, **options: Any
    ) -> Trajectory:
        try:
            session, page = await self._start(task, tools, self.tool_names(task))
        except InfraError as e:
            failed = Trajectory(task.id, group_id, trajectory_id, (), (), StopReason.INFRA_ERROR, error=str(e))
            return failed
        token = _opened.set((session, _text_of(page)))
        try:
            return await super().run(task, policy, tools, group_id=group_id, trajectory_id=trajectory_id, **options)
        finally:
            _opened.reset(token)
            if not session.handed_out:  # the episode ended before it asked for its session
                await _close_quietly(session)

    async def open_episode(self, task: Task, tools: ToolBackend, names: Sequence[str] | None) -> ToolSession:
        opened = _opened.get()
        if opened is not None and not opened[0].handed_out:
            opened[0].handed_out = True
            return opened[0]
        session, _ = await self._start(task, tools, names)
        session.handed_out = True
        return session

    async def finish_episode(self, task: Task, session: ToolSession) -> dict[str, float]:
        states = app_server().state(session.key) if isinstance(session, EpisodeSession) else None
        if states is None:
            return {}
        return {CHECK_COMPONENT: 1.0 if check(task.id, states) else 0.0}

    async def _start(
        self, task: Task, tools: ToolBackend, names: Sequence[str] | None
    ) -> tuple[EpisodeSession, ToolResult]:
        """A new episode's session, on the task's start page, and that page as the tool returned it."""
        server = app_server()
        async with _start_slot():
            key = server.new_episode()
            session = EpisodeSession(await tools.open_session(names), key)
            page = await session.call(
                ToolCall("start", "navigate", {"url": server.start_url(key, task.metadata["start_path"])})
            )
        if page.is_error:
            await _close_quietly(session)
            raise TaskSetupError(f"the start page did not open: {page.text}")
        return session, page


class EpisodeSession:
    """A tool session bound to one episode of the applications; forking it forks the application state too."""

    def __init__(self, inner: ToolSession, key: str) -> None:
        self.inner, self.key = inner, key
        self.handed_out = False

    @property
    def session_id(self) -> str:
        return self.inner.session_id

    async def call(self, call: ToolCall) -> ToolResult:
        return await self.inner.call(call)

    async def fork(self) -> EpisodeSession:
        server = app_server()
        forked = EpisodeSession(await self.inner.fork(), server.fork_episode(self.key))
        forked.handed_out = True
        page = await forked.call(ToolCall("fork-observe", "observe", {}))
        url = next((line[5:] for line in _text_of(page).splitlines() if line.startswith("url: ")), "")
        parts = urlsplit(url)
        if parts.path:  # a blank tab has no page to move over
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            moved = await forked.call(ToolCall("fork-rebind", "navigate", {"url": server.start_url(forked.key, path)}))
            if moved.is_error:
                await _close_quietly(forked)
                raise TaskSetupError(f"the forked browser could not move to its own episode: {moved.text}")
        return forked

    async def close(self) -> None:
        await self.inner.close()


async def _close_quietly(session: ToolSession) -> None:
    try:
        await session.close()
    except Exception:  # closing is best effort; the server also collects idle sessions
        pass


def _text_of(result: ToolResult) -> str:
    """The text of a result; a token-level policy cannot see the screenshot part, so it is left out of the prompt."""
    if isinstance(result.content, str):
        return result.content
    return "\n".join(part["text"] for part in result.content if part.get("type") == "text")


class GuiScreenshotScaffold(GuiScaffold):
    """`GuiScaffold` with `observation="screenshot"`, for vision models (`--scaffold gui_screenshot`)."""

    name = "gui_screenshot"

    def __init__(self, *, rollout: RolloutConfig | None = None):
        super().__init__(rollout=rollout, observation="screenshot")
