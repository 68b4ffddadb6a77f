"""Chat plumbing for token-exact multi-turn rollouts with real models' templates.

`chat_format.py` renders prompts and observation ids against the sampled prefix and reads sampled turns
(`ChatFormat`, `ChatSettings`, `template_mismatch`); `tool_formats.py` holds the tool-call formats of model
families and reads the format off a template; `reasoning.py` splits `<think>` blocks off a turn. The JSON a model
wrote is read by `agentrl/json_values.py`, so that nothing it wrote can fail later as an exception.
"""

from agentrl.rollout.chat.chat_format import ChatFormat, ChatSettings, Mismatch, end_of_turn_ids, template_mismatch
from agentrl.rollout.chat.tool_call_format import ParsedTurn, ToolCallFormat
from agentrl.rollout.chat.tool_formats import FORMATS, detect

__all__ = [
    "FORMATS",
    "ChatFormat",
    "ChatSettings",
    "Mismatch",
    "ParsedTurn",
    "ToolCallFormat",
    "detect",
    "end_of_turn_ids",
    "parse_tool_calls",
    "template_mismatch",
]


def parse_tool_calls(text: str, *, id_prefix: str = "call") -> ParsedTurn:
    """Parse Hermes `<tool_call>` markup (the tiny policies' format) out of `text`; never raises."""
    return FORMATS["hermes"].parse(text, id_prefix=id_prefix)
