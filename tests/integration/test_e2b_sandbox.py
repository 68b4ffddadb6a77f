"""The e2b sandbox backend: a clear error without E2B_API_KEY; the real service only when a key is set."""

from __future__ import annotations

import os

import pytest

from agentrl.sandbox.config import SandboxConfig
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient, ToolServerError
from agentrl.toolserver.config import ToolServerConfig
from agentrl.types import ToolCall

pytestmark = pytest.mark.integration

SPECS = ["agentrl.tools.code:PythonInterpreter", "agentrl.tools.terminal:Shell", "agentrl.testing:echo"]


def e2b_app():
    return create_app(SPECS, config=ToolServerConfig(sandbox=SandboxConfig(backend="e2b", call_timeout_s=60)))


async def test_without_an_api_key_a_sandboxed_session_fails_to_open_with_the_reason(monkeypatch) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    async with ToolClient(app=e2b_app(), retries=0) as tools:
        with pytest.raises(ToolServerError, match="E2B_API_KEY") as failure:
            await tools.open_session(["python"])
        assert failure.value.status_code == 500
        # Tools that need no sandbox still serve.
        session = await tools.open_session(["echo"])
        result = await session.call(ToolCall(id="e", name="echo", arguments={"text": "still here"}))
        assert result.text.endswith("still here") and not result.is_error
        await session.close()


@pytest.mark.skipif(not os.environ.get("E2B_API_KEY"), reason="needs E2B_API_KEY (the real e2b service)")
async def test_e2b_sessions_keep_state_and_fork() -> None:
    async with ToolClient(app=e2b_app(), timeout_s=180) as tools:
        session = await tools.open_session(["python", "bash"])

        async def run(s, name: str, **arguments):
            return await s.call(ToolCall(id=os.urandom(4).hex(), name=name, arguments=arguments))

        await run(session, "python", code="x = 41")
        assert (await run(session, "python", code="x + 1")).text.endswith("42")
        await run(session, "bash", command="mkdir -p /tmp/w && cd /tmp/w && export G=hi")
        assert (await run(session, "bash", command='pwd; echo "$G"')).text.splitlines()[:2] == ["/tmp/w", "hi"]
        fork = await session.fork()
        await run(fork, "python", code="x = 0")
        assert (await run(session, "python", code="x")).text.endswith("41")
        assert (await run(fork, "python", code="x")).text.endswith("0")
        await fork.close()
        await session.close()
