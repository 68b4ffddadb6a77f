"""`@tool`: schemas from type hints and docstrings, validation, and errors as results."""

import asyncio
import dataclasses
import enum
import json
import threading
from typing import Annotated, Literal, Optional

import pytest
from pydantic import BaseModel

from agentrl.testing import ECHO_STAMP, Counter, echo
from agentrl.tool import FunctionTool, ToolDefinitionError, collect_tools, tool
from agentrl.types import ToolResult

pytestmark = pytest.mark.unit


@tool
def lookup(entity: str, field: Literal["capital", "population"] = "capital") -> str:
    """Look up a fact.

    Args:
        entity: Name of the entity.
        field: Which fact to return.
    """
    return f"{field} of {entity}"


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    width: float
    height: float


@tool
def everything(
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    maybe: Optional[int],  # noqa: UP045 - the Optional spelling is under test
    color: Color,
    items: list[int],
    weights: dict[str, float],
    pair: tuple[int, str],
    point: Point,
    box: Box,
    mode: Annotated[Literal["fast", "slow"], "How hard to try."] = "fast",
) -> dict:
    """Exercise every supported type.

    A second paragraph that belongs to the description.

    Args:
        text: Some text.
        count: A count.
        ratio: A ratio.
        flag: A flag.
        maybe: An optional number.
        color: A color.
        items: Some integers.
        weights: Named weights.
        pair: A number and a word.
        point: A point.
        box: A box.
        mode: Overridden by the Annotated description.
    """
    return {"point": point, "box": box, "color": color, "pair": pair, "mode": mode}


def params(t: FunctionTool) -> dict:
    return t.schema["function"]["parameters"]


def test_issue_example_schema() -> None:
    schema = lookup.schema
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "lookup"
    assert function["description"] == "Look up a fact."
    parameters = function["parameters"]
    assert parameters["type"] == "object"
    assert parameters["required"] == ["entity"]
    assert parameters["properties"]["field"]["enum"] == ["capital", "population"]
    assert parameters["properties"]["entity"] == {"type": "string", "description": "Name of the entity."}
    assert parameters["additionalProperties"] is False
    assert "title" not in parameters


def test_scalar_types() -> None:
    props = params(everything)["properties"]
    assert props["text"]["type"] == "string"
    assert props["count"]["type"] == "integer"
    assert props["ratio"]["type"] == "number"
    assert props["flag"]["type"] == "boolean"
    assert {"type": "integer"} in props["maybe"]["anyOf"] and {"type": "null"} in props["maybe"]["anyOf"]


def test_enum_and_literal_become_enum() -> None:
    props = params(everything)["properties"]
    assert props["color"]["enum"] == ["red", "blue"]
    assert props["mode"]["enum"] == ["fast", "slow"]


def test_containers() -> None:
    props = params(everything)["properties"]
    assert props["items"] == {"type": "array", "items": {"type": "integer"}, "description": "Some integers."}
    assert props["weights"]["type"] == "object"
    assert props["weights"]["additionalProperties"] == {"type": "number"}
    assert props["pair"]["type"] == "array"
    assert [p["type"] for p in props["pair"]["prefixItems"]] == ["integer", "string"]


def test_nested_model_and_dataclass_are_inlined() -> None:
    parameters = params(everything)
    assert "$defs" not in parameters
    assert "$ref" not in json.dumps(parameters)
    point = parameters["properties"]["point"]
    assert point["type"] == "object" and point["required"] == ["x"]
    assert point["description"] == "A point."
    box = parameters["properties"]["box"]
    assert set(box["properties"]) == {"width", "height"}
    assert "title" not in json.dumps(parameters)


def test_defaults_are_not_required() -> None:
    parameters = params(everything)
    assert "mode" not in parameters["required"]
    assert parameters["properties"]["mode"]["default"] == "fast"
    assert "maybe" in parameters["required"]  # Optional without a default is still required


def test_descriptions_from_docstring_and_annotated() -> None:
    function = everything.schema["function"]
    assert function["description"] == (
        "Exercise every supported type.\n\nA second paragraph that belongs to the description."
    )
    props = function["parameters"]["properties"]
    assert props["count"]["description"] == "A count."
    assert props["mode"]["description"] == "How hard to try."  # Annotated wins over the docstring


def test_annotated_alone_needs_no_args_block() -> None:
    @tool
    def greet(name: Annotated[str, "Who to greet."]) -> str:
        """Greet someone."""
        return f"hello {name}"

    assert params(greet)["properties"]["name"]["description"] == "Who to greet."


def test_recursive_model_keeps_defs() -> None:
    class Node(BaseModel):
        children: list["Node"] = []

    @tool
    def walk(root: Node) -> int:
        """Count nodes.

        Args:
            root: The tree.
        """
        return 1

    parameters = params(walk)
    assert set(parameters["$defs"]) == {"Node"}
    assert parameters["properties"]["root"]["description"] == "The tree."


def test_missing_parameter_description_fails_at_decoration() -> None:
    with pytest.raises(ToolDefinitionError, match=r"'limit'.*'search'"):

        @tool
        def search(query: str, limit: int = 5) -> str:
            """Search the corpus.

            Args:
                query: What to look for.
            """
            return query


def test_missing_docstring_fails_at_decoration() -> None:
    with pytest.raises(ToolDefinitionError, match="'bare'"):

        @tool
        def bare(x: Annotated[int, "A number."]) -> int:
            return x


def test_missing_annotation_and_varargs_fail() -> None:
    with pytest.raises(ToolDefinitionError, match="'x'.*no type annotation"):

        @tool
        def untyped(x) -> int:  # type: ignore[no-untyped-def]
            """Untyped.

            Args:
                x: Something.
            """
            return x

    with pytest.raises(ToolDefinitionError, match="kwargs"):

        @tool
        def variadic(**kwargs: int) -> int:
            """Variadic.

            Args:
                kwargs: Anything.
            """
            return 0


def test_options_override_name_description_and_timeout() -> None:
    @tool(name="find", description="Find things.", timeout_s=2.0)
    def lookup_v2(query: Annotated[str, "What to find."]) -> str:
        return query

    assert lookup_v2.name == "find" and lookup_v2.timeout_s == 2.0
    assert lookup_v2.schema["function"]["description"] == "Find things."
    assert lookup_v2.schema["function"]["name"] == "find"


def test_decorated_function_stays_callable() -> None:
    assert lookup("France") == "capital of France"
    assert lookup("France", field="population") == "population of France"
    assert echo("hi") == f"echo[{ECHO_STAMP}]: hi"
    assert lookup.__name__ == "lookup" and lookup.__doc__.startswith("Look up")


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
