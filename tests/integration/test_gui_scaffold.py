"""The GUI scaffold end to end: every bundled task in the real browser, scored by its checker of the app state."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
from collections import Counter

import pytest
import pytest_asyncio
from agentrl.tools.gui.launcher import gui_unavailable_reason
from fastapi import FastAPI

pytestmark = pytest.mark.integration
in_module_loop = pytest.mark.asyncio(loop_scope="module")

if (reason := gui_unavailable_reason()) is not None:
    pytest.skip(f"GUI tests need playwright and chromium: {reason}", allow_module_level=True)

from agentrl.scaffolds.gui import expert  # noqa: E402
from agentrl.scaffolds.gui.app_server import app_server  # noqa: E402
from agentrl.scaffolds.gui.gui_scaffold import OBSERVE_FIRST  # noqa: E402
from agentrl.scaffolds.gui.tasks import gui_tasks  # noqa: E402
from agentrl.tools.gui.launcher import SharedBrowser  # noqa: E402

from agentrl.registry import load_scaffold, resolve  # noqa: E402
from agentrl.reward import RewardStack  # noqa: E402
from agentrl.testing import ScriptedPolicy, serve_in_thread  # noqa: E402
from agentrl.toolserver.app import create_app  # noqa: E402
from agentrl.toolserver.client import ToolClient  # noqa: E402
from agentrl.types import StopReason, ToolCall, Trajectory  # noqa: E402

CONCURRENT_EPISODES = 2  # chromium pages on a 2-core machine: more only queue, and risk the 5 s action timeout


@pytest.fixture(scope="module")
def scaffold():
    return load_scaffold("gui")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def tools(scaffold):
    async with ToolClient(app=create_app(list(scaffold.toolsets()))) as client:
        yield client
    await SharedBrowser.close()


def all_tasks(scaffold):
    return list(scaffold.tasks("train")) + list(scaffold.tasks("test"))


async def play_all(scaffold, tools, policy, tasks=None) -> dict[str, Trajectory]:
    """Every bundled task (or these) once, a few episodes at a time, scored by the scaffold's own rewards."""
    rewards = RewardStack.from_specs(scaffold.reward_names())
    gate = asyncio.Semaphore(CONCURRENT_EPISODES)

    async def one(task):
        async with gate:
            trajectory = await scaffold.run(
                task, policy, tools, group_id=task.id, trajectory_id=f"{task.id}/{os.urandom(4).hex()}"
            )
        return task.id, await rewards.score(task, trajectory)

    return dict(await asyncio.gather(*(one(task) for task in tasks or all_tasks(scaffold))))


def test_bundled_tasks_cover_four_apps_three_tiers_and_both_splits(scaffold) -> None:
    tasks = all_tasks(scaffold)
    assert len(tasks) >= 20 and len({t.id for t in tasks}) == len(tasks)
    assert set(Counter(t.metadata["app"] for t in tasks)) == {"login", "todo", "settings", "shop"}
    for split in ("train", "test"):
        assert {t.metadata["tier"] for t in scaffold.tasks(split)} == {"easy", "medium", "hard"}
    goals = [t.prompt for t in tasks]
    assert not [a for a in goals for b in goals if a != b and a in b]  # the expert finds its task by goal
    assert resolve("toolset", "gui").__name__ == "Browser" and scaffold.reward_names() == ("gui_check",)


@in_module_loop
async def test_scripted_expert_solves_every_task(scaffold, tools, tiny_tokenizer) -> None:
    policy = ScriptedPolicy(tiny_tokenizer, expert.reply)
    results = await play_all(scaffold, tools, policy)
    failed = {k: (t.stop_reason, t.error, t.messages[-2:]) for k, t in results.items() if t.reward != 1.0}
    assert not failed
    for task_id, trajectory in results.items():
        steps = len(gui_tasks()[task_id][1].metadata["steps"])
        assert trajectory.stop_reason is StopReason.ANSWERED and trajectory.num_tool_calls == steps
        assert all(not r.is_error for turn in trajectory.turns for r in turn.tool_results)


@in_module_loop
async def test_clicking_the_goal_s_label_solves_every_easy_task(scaffold, tools, tiny_tokenizer) -> None:
    """What the tiny policy learns: `click(label=...)` with the label the easy goal quotes, then done."""

    def by_label(prompt: str) -> str:
        if prompt.count("<|im_start|>assistant") > 1:
            return "done"
        role, label = re.search(r"Click the (\w+) labelled '([^']*)'\.", prompt).groups()
        return "<tool_call>\n" + json.dumps({"name": "click", "arguments": {"label": label}}) + "\n</tool_call>"

    easy = [t for t in all_tasks(scaffold) if t.metadata["tier"] == "easy"]
    results = await play_all(scaffold, tools, ScriptedPolicy(tiny_tokenizer, by_label), easy)
    failed = {k: (t.stop_reason, t.error, t.messages[-2:]) for k, t in results.items() if t.reward != 1.0}
    assert len(results) >= 20 and not failed


@in_module_loop
async def test_a_policy_that_does_nothing_solves_no_task(scaffold, tools, tiny_tokenizer) -> None:
    results = await play_all(scaffold, tools, ScriptedPolicy(tiny_tokenizer, ["done"]))
    assert {t.reward for t in results.values()} == {0.0}
    assert {t.stop_reason for t in results.values()} == {StopReason.ANSWERED}
    first = results["gui/todo/done-buy-milk"]
    assert '[1] button "Mark done: Buy milk"' in first.messages[1]["content"]  # the start page is in the prompt


@in_module_loop
async def test_an_episode_opened_without_run_is_told_to_observe_and_still_checked(scaffold, tools) -> None:
    """`agentrl eval` with native tool calls builds the messages before the session opens (`open_episode`)."""
    task = next(t for t in all_tasks(scaffold) if t.id == "gui/settings/dark-theme")
    assert scaffold.initial_messages(task)[1]["content"] == f"{task.prompt}\n\n{OBSERVE_FIRST}"
    session = await scaffold.open_episode(task, tools, scaffold.tool_names(task))
    page = (await session.call(ToolCall("c0", "observe", {}))).text
    assert "# Settings" in page
    assert await scaffold.finish_episode(task, session) == {"gui_check": 0.0}
    for k, step in enumerate(task.metadata["steps"]):
        name, arguments = expert.tool_call(step, page)
        page = (await session.call(ToolCall(f"c{k + 1}", name, arguments))).text
    assert await scaffold.finish_episode(task, session) == {"gui_check": 1.0}
    await session.close()


@in_module_loop
async def test_a_forked_episode_has_the_same_page_and_its_own_app_state(scaffold, tools) -> None:
    task = next(t for t in all_tasks(scaffold) if t.id == "gui/shop/two-mugs")
    parent = await scaffold.open_episode(task, tools, scaffold.tool_names(task))
    page = (await parent.call(ToolCall("c0", "observe", {}))).text
    add_mug = {"id": expert.element_id(page, "button", "Add Mug to cart")}
    one_mug = (await parent.call(ToolCall("c1", "click", add_mug))).text
    branch = await parent.fork()
    assert (await branch.call(ToolCall("b0", "observe", {}))).text == one_mug
    await branch.call(ToolCall("b1", "click", add_mug))
    assert await scaffold.finish_episode(task, branch) == {"gui_check": 1.0}
    assert await scaffold.finish_episode(task, parent) == {"gui_check": 0.0}
    for k in range(2):
        await parent.call(ToolCall(f"c{k + 2}", "click", add_mug))
    assert app_server().state(parent.key)["shop"].data["cart"] == {"mug": 3}
    assert app_server().state(branch.key)["shop"].data["cart"] == {"mug": 2}
    assert "Cart (2)" in (await branch.call(ToolCall("b2", "observe", {}))).text
    await branch.close()
    await parent.close()


def screenshot_chat_server(received: list[list[dict]]) -> FastAPI:
    """A vision-model double on /v1/chat/completions: observe, then the task's expert steps on the latest outline,
    then `done`; it records every request's messages."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(body: dict) -> dict:
        messages = body["messages"]
        received.append(messages)
        task = expert.task_in(messages[1]["content"])
        done = sum(m["role"] == "assistant" for m in messages)
        outline = next(m["content"] for m in reversed(messages) if m["role"] == "tool") if done else ""
        steps = task.metadata["steps"]
        if done == 0 or done <= len(steps):
            name, arguments = ("observe", {}) if done == 0 else expert.tool_call(steps[done - 1], outline)
            function = {"name": name, "arguments": json.dumps(arguments)}
            call = {"id": f"c{done}", "type": "function", "function": function}
            message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "done"}, "stop"
        return {
            "id": f"chat-{done}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    return app


async def test_eval_of_a_vision_model_sends_each_screenshot_as_an_image_part(tmp_path) -> None:
    """`agentrl eval --scaffold gui_screenshot` over native tool calls: the model receives a PNG of the page
    after every browser action, in a user message after the tool messages, and the task is still checked."""
    from agentrl.config import EvalRunConfig
    from agentrl.eval.runner import evaluate

    received: list[list[dict]] = []
    with serve_in_thread(screenshot_chat_server(received)) as url:
        config = EvalRunConfig(
            scaffold="gui_screenshot",
            model="vision",
            base_url=url + "/v1",
            format="native",
            tiers=("easy",),
            max_tasks=2,
            output=str(tmp_path / "gui.jsonl"),
        )
        outcome = await evaluate(config)
    assert outcome.summary["infra_errors"] == 0 and [r.success for r in outcome.records] == [True, True]
    last = max(received, key=len)
    images = [m for m in last if m["role"] == "user" and isinstance(m["content"], list)]
    assert len(images) == 2  # after observe and after the click
    for message, tool in zip(images, [m for m in last if m["role"] == "tool"], strict=True):
        assert last.index(message) == last.index(tool) + 1
        (part,) = [p for p in message["content"] if p["type"] == "image_url"]
        png = base64.b64decode(part["image_url"]["url"].removeprefix("data:image/png;base64,"))
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    stored = (tmp_path / "gui.jsonl").read_text()
    assert "image_url" in stored and "iVBOR" not in stored  # the results file keeps the parts, not the pixels


async def test_an_in_process_tool_server_closes_its_browser_with_its_client() -> None:
    """Stopping the server (here: closing the client of an in-process app) runs the toolset's teardown, so no
    chromium outlives it."""
    from agentrl.tools.gui import Browser

    async with ToolClient(app=create_app([Browser])) as client:
        session = await client.open_session(None)
        assert "url: about:blank" in (await session.call(ToolCall("c0", "observe", {}))).text
        browser = await SharedBrowser.get()
        assert browser.is_connected()
    assert not browser.is_connected()
