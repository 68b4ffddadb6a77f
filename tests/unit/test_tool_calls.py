"""`@tool` calls: arguments validated against the schema, sync and async bodies, and errors as results."""

import asyncio
import json
import threading
from typing import Annotated

import pytest
from test_tool_schema import Color, everything, lookup, params

from agentrl.testing import Counter, echo
from agentrl.tool import collect_tools, tool
from agentrl.types import ToolResult

pytestmark = pytest.mark.unit


async def test_sync_call() -> None:
    result = await lookup.call({"entity": "France", "field": "population"}, call_id="c1")
    assert result == ToolResult(call_id="c1", content="population of France", elapsed_s=result.elapsed_s)
    assert result.elapsed_s > 0


async def test_sync_tool_does_not_block_event_loop() -> None:
    released = threading.Event()

    @tool
    def wait_for_loop(timeout_s: Annotated[float, "How long to wait."]) -> bool:
        """Wait until the event loop releases the event; only possible if the loop is not blocked."""
        return released.wait(timeout_s)

    pending = asyncio.create_task(wait_for_loop.call({"timeout_s": 10}))
    await asyncio.sleep(0.01)
    released.set()
    assert (await pending).content == "true"


async def test_async_call() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: The address.
        """
        await asyncio.sleep(0)
        return f"page at {url}"

    assert fetch.__name__ == "fetch"
    assert (await fetch.call({"url": "x"}, call_id="a")).content == "page at x"
    assert await fetch("y") == "page at y"


async def test_json_string_arguments() -> None:
    result = await lookup.call('{"entity": "Peru"}', call_id="j")
    assert not result.is_error and result.content == "capital of Peru"


async def test_bad_literal_names_field() -> None:
    result = await lookup.call({"entity": "France", "field": "area"}, call_id="b")
    assert result.is_error and result.error_type == "bad_arguments" and result.call_id == "b"
    assert result.content == "bad arguments for lookup: field 'field': Input should be 'capital' or 'population'"


async def test_missing_and_wrong_typed_arguments() -> None:
    result = await everything.call({"text": "t", "count": "many"})
    assert result.error_type == "bad_arguments"
    assert "field 'count': Input should be a valid integer" in result.content
    assert "field 'ratio': Field required" in result.content


async def test_bad_json_and_non_object_arguments() -> None:
    broken = await lookup.call('{"entity": ', call_id="x")
    assert broken.error_type == "bad_arguments" and "not valid JSON" in broken.content
    listed = await lookup.call("[1, 2]", call_id="y")
    assert listed.error_type == "bad_arguments" and "JSON object" in listed.content


async def test_extra_argument_rejected() -> None:
    result = await lookup.call({"entity": "France", "zoom": 3})
    assert result.error_type == "bad_arguments"
    assert "field 'zoom': Extra inputs are not permitted" in result.content


async def test_nested_values_arrive_as_their_types() -> None:
    arguments = {
        "text": "t", "count": 1, "ratio": 0.5, "flag": True, "maybe": None, "color": "blue", "items": [1],
        "weights": {"a": 1}, "pair": [1, "b"], "point": {"x": 3}, "box": {"width": 1, "height": 2},
    }  # fmt: skip
    result = await everything.call(arguments)
    assert not result.is_error, result.content
    assert json.loads(result.content) == {
        "point": {"x": 3, "y": 0}, "box": {"width": 1.0, "height": 2.0}, "color": "blue", "pair": [1, "b"],
        "mode": "fast",
    }  # fmt: skip


async def test_exception_becomes_failed() -> None:
    @tool
    def divide(a: int, b: int) -> float:
        """Divide.

        Args:
            a: Numerator.
            b: Denominator.
        """
        return a / b

    result = await divide.call({"a": 1, "b": 0}, call_id="d")
    assert result.is_error and result.error_type == "failed"
    assert result.content == "ZeroDivisionError: division by zero"


async def test_timeout() -> None:
    @tool(timeout_s=0.05)
    async def hang(seconds: Annotated[float, "How long."]) -> str:
        """Sleep."""
        await asyncio.sleep(seconds)
        return "done"

    released = threading.Event()

    @tool(timeout_s=0.05)
    def hang_sync(seconds: Annotated[float, "How long."]) -> str:
        """Block a worker thread until released."""
        released.wait(seconds)
        return "done"

    try:
        for t in (hang, hang_sync):
            result = await t.call({"seconds": 10}, call_id="t")
            assert result.is_error and result.error_type == "timeout", result
            assert result.content.endswith("timed out after 0.05s")
            assert result.elapsed_s < 5  # did not wait for the blocked thread
    finally:
        released.set()
    assert (await hang.call({"seconds": 0})).content == "done"


async def test_return_value_conversion() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "data:,"}}]

    @tool
    def produce(kind: Annotated[str, "What to return."]) -> object:
        """Return things of several kinds."""
        return {
            "parts": parts,
            "result": ToolResult(call_id="ignored", content="custom", metrics={"n": 1.0}),
            "json": {"n": 1, "when": Color.RED},
            "plain_list": [1, 2],
        }[kind]

    assert (await produce.call({"kind": "parts"}, call_id="p")).content == parts
    custom = await produce.call({"kind": "result"}, call_id="r")
    assert custom.call_id == "r" and custom.content == "custom" and custom.metrics == {"n": 1.0}
    assert json.loads((await produce.call({"kind": "json"})).content) == {"n": 1, "when": "red"}
    assert (await produce.call({"kind": "plain_list"})).content == "[1, 2]"


async def test_methods_are_bound_per_instance() -> None:
    first, second = Counter(), Counter()
    assert "self" not in json.dumps(Counter.increment.schema)
    assert params(Counter.increment)["properties"]["by"]["default"] == 1
    assert (await first.increment.call({"by": 5})).content == "5"
    assert (await first.increment.call({})).content == "6"
    assert (await second.value.call({})).content == "0"
    assert first.increment(1) == 7  # the bound tool stays callable as the method
    assert Counter.increment(second, 2) == 2
    unbound = await Counter.increment.call({})
    assert unbound.error_type == "failed"


def test_collect_tools() -> None:
    import agentrl.testing as testing_module

    assert collect_tools(testing_module) == [echo]
    assert [t.name for t in collect_tools(Counter)] == ["increment", "value"]
    counter = Counter()
    bound = collect_tools(counter)
    assert [t.name for t in bound] == ["increment", "value"]
    assert bound[0](3) == 3 and counter.count == 3
    assert collect_tools(lookup) == [lookup]
