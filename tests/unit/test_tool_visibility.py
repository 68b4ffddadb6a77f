"""Can the policy see the episode's tools? The tiny policy's template renders no schemas, so it sees only the tools
its checkpoint records having learned (name and required arguments); a family template that renders schemas sees
every tool; `agentrl sft` adds the tools of its demonstrations to the record."""

from __future__ import annotations

import pytest
from agentrl.scaffolds.code.tools import calculate
from agentrl.scaffolds.react import ReactScaffold
from transformers import AutoConfig

from agentrl import tool
from agentrl.config import PolicyConfig
from agentrl.doctor.tool_visibility import (
    TRAINED_TOOLS_KEY,
    called_tools,
    check_tool_visibility,
    record_trained_tools,
    tool_visibility,
)
from agentrl.errors import ConfigError
from agentrl.testing.families import family_tokenizer
from agentrl.tiny import POLICY_DIR

pytestmark = pytest.mark.unit


@tool
def convert(value: float, source: str, target: str) -> str:
    """Convert between units.

    Args:
        value: The number.
        source: Its unit.
        target: The unit wanted.
    """
    return str(value)


@tool
def calculate_expr(expr: str) -> str:  # the name the tiny policy knows, under other arguments
    """Evaluate arithmetic.

    Args:
        expr: The arithmetic.
    """
    return expr


def schema(t, name=None):
    out = dict(t.schema["function"])
    return {"type": "function", "function": {**out, "name": name or out["name"]}}


def test_the_tiny_policy_sees_only_the_tools_it_learned(tiny_tokenizer):
    config = AutoConfig.from_pretrained(POLICY_DIR)
    assert dict(getattr(config, TRAINED_TOOLS_KEY)) == {"calculate": ["expression"], "lookup": ["entity", "field"]}
    seen = tool_visibility(tiny_tokenizer, None, config, [schema(calculate)])
    assert not seen.renders_schemas and not seen.unseen
    blind = tool_visibility(tiny_tokenizer, None, config, [schema(convert)])
    assert blind.blind and blind.unseen == ("convert",)
    assert "cannot see the tools convert" in blind.message("tiny") and "agentrl sft" in blind.message("tiny")
    renamed = tool_visibility(tiny_tokenizer, None, config, [schema(calculate_expr, "calculate"), schema(convert)])
    assert renamed.unseen == ("calculate", "convert")  # the known name with another required argument is unseen
    partial = tool_visibility(tiny_tokenizer, None, config, [schema(calculate), schema(convert)])
    assert partial.unseen == ("convert",) and not partial.blind


def test_a_template_that_renders_schemas_shows_every_tool():
    seen = tool_visibility(family_tokenizer("qwen2"), None, None, [schema(convert)])
    assert seen.renders_schemas and not seen.unseen


def test_a_run_offering_only_unseen_tools_is_refused_unless_allowed(capsys):
    scaffold = ReactScaffold(tools=[convert])
    with pytest.raises(ConfigError, match="cannot see the tools convert.*policy.allow_unseen_tools=true"):
        check_tool_visibility(PolicyConfig(model="tiny"), scaffold)
    check_tool_visibility(PolicyConfig(model="tiny", allow_unseen_tools=True), scaffold)
    assert "warning: the policy (tiny) cannot see the tools convert" in capsys.readouterr().err
    check_tool_visibility(PolicyConfig(model="tiny"), ReactScaffold(tools=[calculate, convert]))  # a warning only
    assert "cannot see the tools convert" in capsys.readouterr().err
    check_tool_visibility(PolicyConfig(model="tiny"), ReactScaffold(tools=[calculate]))
    assert not capsys.readouterr().err


def test_demonstrations_add_their_tools_to_the_record():
    config = AutoConfig.from_pretrained(POLICY_DIR)
    call = {"type": "function", "function": {"name": "convert", "arguments": '{"value": 3, "source": "km"}'}}
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    record_trained_tools(config, called_tools([messages]))
    assert getattr(config, TRAINED_TOOLS_KEY)["convert"] == ["source", "value"]
    assert getattr(config, TRAINED_TOOLS_KEY)["calculate"] == ["expression"]  # what it knew stays


def test_a_module_named_from_python_is_all_its_tools_and_found_in_the_working_directory(tmp_path, monkeypatch):
    from agentrl.config import run_config
    from agentrl.trainer import Trainer

    (tmp_path / "unitconv_tools.py").write_text(
        "from agentrl import tool\n\n\n@tool\ndef convert(value: float) -> str:\n"
        '    """Convert.\n\n    Args:\n        value: The number.\n    """\n    return str(value)\n'
    )
    monkeypatch.chdir(tmp_path)
    tasks = [{"prompt": "How many miles is 3 km?", "answer": "1.86"}]
    with pytest.raises(ConfigError, match="cannot see the tools convert"):  # imported, listed, and refused
        Trainer(["trainer.steps=1", f"output_dir={tmp_path / 'runs'}"], tools=["unitconv_tools"], tasks=tasks)
    assert not (tmp_path / "runs").exists()
    assert run_config(None, tools=["unitconv_tools"]).tools == ("unitconv_tools",)  # config.toml names it so
