"""`agentrl eval` over native tool calls against an endpoint that returns arbitrary assistant messages (content,
tool-call names and argument strings a model might write, malformed JSON, NaN, deep nesting, think blocks): every
episode ends as data (an answer, a bad-arguments result, the turn limit), never as an infrastructure failure."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrl.config import EvalRunConfig
from agentrl.eval.runner import evaluate
from agentrl.testing import serve_in_thread

pytestmark = pytest.mark.integration

REPLY: list[dict] = [{}]
ARGUMENTS = [
    '{"expression": "2+2"}', "{", "NaN", '{"expression": NaN}', '{"expression": "\\ud800"}', "[" * 300 + "]" * 300,
    '{"expression": ' + "9" * 5000 + "}", "", "null", '"just a string"', '{"nested": {"a": [1, {"b": null}]}}',
]  # fmt: skip


def endpoint() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(body: dict) -> dict:
        return {
            "id": "chatcmpl-fuzz",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", **REPLY[0]}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    return app


@pytest.fixture(scope="module")
def url():
    with serve_in_thread(endpoint()) as base:
        yield base


call = st.fixed_dictionaries(
    {
        "id": st.text(max_size=8),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": st.sampled_from(["calculate", "nope", ""]), "arguments": st.sampled_from(ARGUMENTS) | st.text()}
        ),
    }
)
message = st.fixed_dictionaries(
    {"content": st.none() | st.text(max_size=40) | st.just("<think>\nhm\n</think>\n\n4")},
    optional={"tool_calls": st.lists(call, min_size=1, max_size=2)},
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message)
def test_no_assistant_message_is_an_infrastructure_failure(url, tmp_path, reply):
    REPLY[0] = reply
    out = tmp_path / f"{abs(hash(json.dumps(reply, default=str)))}.jsonl"
    config = EvalRunConfig(
        scaffold="code", model="fuzz", base_url=url + "/v1", format="native", max_tasks=1, max_turns=2, output=str(out)
    )
    outcome = asyncio.run(evaluate(config))
    assert outcome.summary["infra_errors"] == 0, outcome.records[0].error
