"""`@tool`: schemas from type hints and docstrings, and what a decoration refuses (the calls: test_tool_calls.py)."""

import dataclasses
import enum
import json
from typing import Annotated, Literal, Optional

import pytest
from pydantic import BaseModel

from agentrl.testing import ECHO_STAMP, echo
from agentrl.tool import FunctionTool, ToolDefinitionError, tool

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
