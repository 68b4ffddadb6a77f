"""The code, terminal and files toolsets through a real tool server, in real bubblewrap sandboxes."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest

from agentrl.sandbox.config import SandboxConfig
from agentrl.sandbox.processes import alive
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient, ToolServerUnavailable
from agentrl.toolserver.config import ToolServerConfig
from agentrl.types import ToolCall

pytestmark = pytest.mark.integration

TOOLSETS = ["code", "terminal", "files"]
SPECS = ["agentrl.tools.code:PythonInterpreter", "agentrl.tools.terminal:Shell", "agentrl.tools.files:FileEditor"]


@pytest.fixture
def sandbox_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root for workspaces that sandbox uids can reach (pytest's own temp dirs are private to their owner)."""
    root = Path(tempfile.mkdtemp(prefix="agentrl-test-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def make_app(root: Path, **overrides):
    sandbox = SandboxConfig(root_dir=str(root), **overrides.pop("sandbox", {}))
    return create_app(SPECS, config=ToolServerConfig(sandbox=sandbox, **overrides))


async def call(session, name: str, **arguments):
    return await session.call(ToolCall(id=os.urandom(6).hex(), name=name, arguments=arguments))


async def test_interpreter_shell_and_workspace_persist_across_calls(sandbox_root: Path) -> None:
    async with ToolClient(app=make_app(sandbox_root)) as tools:
        session = await tools.open_session()
        assert (await call(session, "python", code="x = 20\ndef f(y):\n    return x + y")).text == "(no output)"
        result = await call(session, "python", code="print('hi')\nf(22)")
        assert result.text == "hi\nOut: 42" and not result.is_error
        await call(session, "bash", command="mkdir -p src && cd src && export GREETING=hello")
        result = await call(session, "bash", command='pwd; echo "$GREETING"; false')
        assert result.text.splitlines() == ["/workspace/src", "hello", "[exit code 1]"]
        assert result.metrics["exit_code"] == 1
        await call(session, "create_file", path="src/app.py", content="def add(a, b):\n    return a - b\n")
        # The interpreter, the shell and the file tools share one workspace.
        assert "return a - b" in (await call(session, "bash", command="cat app.py")).text
        assert (await call(session, "python", code="open('src/app.py').read().count('def')")).text == "Out: 1"
        await session.close()


async def test_file_tools_view_edit_find_grep(sandbox_root: Path) -> None:
    async with ToolClient(app=make_app(sandbox_root)) as tools:
        session = await tools.open_session(["create_file", "view", "str_replace", "find_files", "grep"])
        body = "".join(f"line {n}\n" for n in range(1, 501)) + "twin\ntwin\n"
        await call(session, "create_file", path="pkg/big.txt", content=body)
        view = await call(session, "view", path="pkg/big.txt", start_line=3, end_line=4)
        assert view.text == "     3\tline 3\n     4\tline 4"
        head = await call(session, "view", path="pkg/big.txt")
        assert head.text.endswith("[... 102 more lines: view with start_line=401]")
        twice = await call(session, "str_replace", path="pkg/big.txt", old_str="twin\n", new_str="one\n")
        assert twice.is_error and "occurs 2 times" in twice.text and "501, 502" in twice.text
        missing = await call(session, "str_replace", path="pkg/big.txt", old_str="line 9999", new_str="x")
        assert missing.is_error and "does not occur" in missing.text
        done = await call(session, "str_replace", path="pkg/big.txt", old_str="line 7\n", new_str="seven\n")
        assert not done.is_error and "line 7" not in (await call(session, "view", path="pkg/big.txt", end_line=8)).text
        assert (await call(session, "find_files", pattern="*.txt")).text == "/workspace/pkg/big.txt"
        assert (await call(session, "grep", pattern="^seven$")).text == "/workspace/pkg/big.txt:7:seven"
        assert (await call(session, "grep", pattern="nothing-here")).text == "no matches"
        listing = await call(session, "view", path=".")
        assert "/workspace/pkg/big.txt" in listing.text
        absent = await call(session, "view", path="nope.py")
        assert absent.is_error and absent.error_type == "failed" and "No such file" in absent.text


async def test_fork_copies_interpreter_shell_and_files_then_diverges(sandbox_root: Path) -> None:
    async with ToolClient(app=make_app(sandbox_root)) as tools:
        parent = await tools.open_session()
        await call(parent, "python", code="import json\nstate = {'n': 1}")
        await call(parent, "bash", command="mkdir -p work && cd work && export MODE=parent && echo a > notes.txt")
        child = await parent.fork()
        assert (await call(child, "python", code="json.dumps(state)")).text == """Out: '{"n": 1}'"""
        assert (
            await call(child, "bash", command="pwd; echo $MODE; cat notes.txt")
        ).text == "/workspace/work\nparent\na"
        await call(child, "python", code="state['n'] = 2")
        await call(child, "bash", command="echo b > notes.txt; export MODE=child")
        assert (await call(parent, "python", code="state['n']")).text == "Out: 1"
        assert (await call(parent, "bash", command="cat notes.txt; echo $MODE")).text == "a\nparent"
        grandchild = await child.fork()
        assert (await call(grandchild, "bash", command="cat notes.txt")).text == "b"
        # A fork of a session that never ran code is an empty session.
        fresh = await (await tools.open_session()).fork()
        assert (await call(fresh, "bash", command="ls -A | wc -l")).text == "0"


async def test_timeouts_truncation_and_crashes_are_typed_and_recover(sandbox_root: Path) -> None:
    app = make_app(sandbox_root, sandbox={"call_timeout_s": 1.0, "output_bytes": 1000})
    async with ToolClient(app=app) as tools:
        session = await tools.open_session()
        await call(session, "python", code="kept = 5")
        slow = await call(session, "python", code="while True: pass")
        assert slow.is_error and slow.error_type == "timeout"
        assert (await call(session, "python", code="kept")).text == "Out: 5"  # a soft timeout keeps the namespace
        hang = await call(session, "bash", command="sleep 30")
        assert hang.is_error and hang.error_type == "timeout"
        flood = await call(session, "python", code="print('x' * 100000)")
        assert "more bytes of output were cut" in flood.text and len(flood.text) < 1200
        # A worker that dies mid-call: a sandbox_error for that call, a fresh worker for the next.
        crash = await call(session, "python", code="import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
        assert crash.is_error and crash.error_type == "sandbox_error"
        after = await call(session, "python", code="print(2 + 2)")
        assert after.text == "4" and not after.is_error
        # Code that blocks the timer signal outlives the soft timeout: the worker is killed and replaced.
        stuck = await call(
            session,
            "python",
            code="import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])\ntime.sleep(30)",
        )
        assert stuck.is_error and stuck.error_type == "timeout" and "were lost" in stuck.text
        assert (await call(session, "bash", command="echo back")).text == "back"


async def test_session_close_and_server_stop_leave_no_process_or_directory(sandbox_root: Path) -> None:
    app = make_app(sandbox_root)
    server = app.state.tool_server
    async with ToolClient(app=app) as tools:
        sessions = [await tools.open_session() for _ in range(3)]
        for session in sessions:
            await call(session, "bash", command="sleep 300 & echo started")
        forked = await sessions[0].fork()
        await call(forked, "python", code="1")
        pids = [s._inner.pid for s in (server.sessions[x.session_id].sandbox for x in [*sessions, forked])]
        assert all(alive(pid) for pid in pids)
        await sessions[1].close()
        assert not alive(pids[1])
        await server.close_all()
    assert not any(alive(pid) for pid in pids)
    assert not any(sandbox_root.iterdir())


async def test_idle_sessions_expire_and_admission_refuses_beyond_queue(sandbox_root: Path) -> None:
    app = make_app(sandbox_root, session_ttl_s=0.5, max_concurrent_calls=1, max_queued_calls=1)
    async with ToolClient(app=app, retries=0) as tools:
        idle = await tools.open_session()
        await call(idle, "python", code="1")
        busy = [await tools.open_session(["python"]) for _ in range(3)]
        # One runs, one waits, the third is refused (503) at once rather than queued without bound.
        results = await asyncio.gather(
            *(call(s, "python", code="import time; time.sleep(0.6)") for s in busy), return_exceptions=True
        )
        refused = [r for r in results if isinstance(r, ToolServerUnavailable)]
        assert len(refused) == 1 and sum(not isinstance(r, Exception) for r in results) == 2
        await asyncio.sleep(1.0)
        assert idle.session_id not in app.state.tool_server.sessions
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://tools") as http:
            metrics = (await http.get("/metrics")).text
        assert not app.state.tool_server.sessions  # the three busy ones went idle too
        assert "agentrl_tool_sessions_expired_total 4.0" in metrics
        assert 'agentrl_tool_calls_refused_total{toolset="agentrl.tools.code:PythonInterpreter"} 1.0' in metrics
        assert "agentrl_tool_queue_seconds_bucket" in metrics


def test_sandboxes_start_when_the_package_lives_in_a_private_directory(tmp_path: Path) -> None:
    """As root each sandbox runs as a uid of its own, which cannot read a package under a 0700 directory (a venv
    in /root, a fresh CI clone in mkdtemp): the worker must reach the sandbox some other way."""
    import subprocess
    import sys

    if os.geteuid() != 0:
        pytest.skip("only a root server hands sandboxes uids of their own")
    private = Path(tempfile.mkdtemp(prefix="agentrl-private-"))
    try:
        private.chmod(0o700)
        shutil.copytree(Path(__import__("agentrl").__file__).parent, private / "agentrl")
        code = (
            "import asyncio\n"
            "from agentrl.sandbox import SandboxConfig, SandboxProvider\n"
            "async def main():\n"
            "    provider = SandboxProvider(SandboxConfig())\n"
            "    sandbox = await provider.start()\n"
            "    print((await sandbox.run_python('print(6 * 7)', timeout_s=20)).stdout.strip())\n"
            "    await provider.close()\n"
            "asyncio.run(main())\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONPATH": str(private)},
            cwd=private,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0 and out.stdout.strip() == "42", out.stderr[-2000:]
    finally:
        shutil.rmtree(private, ignore_errors=True)


async def test_a_worker_that_fails_to_restart_keeps_the_workspace(sandbox_root: Path) -> None:
    """A worker killed, then its replacement failing to start (here: no interpreter), must not cost the session
    its files: the failed start is a sandbox_error, and the next start finds the workspace where it was."""
    from dataclasses import replace

    from agentrl.errors import SandboxError
    from agentrl.sandbox.bwrap import BwrapBackend
    from agentrl.sandbox.local import LocalSandbox
    from agentrl.sandbox.processes import kill_tree, wait_gone

    config = SandboxConfig(root_dir=str(sandbox_root))
    backend = BwrapBackend(config)
    sandbox = await LocalSandbox.start(backend)
    try:
        await sandbox.write_file("notes.txt", "kept\n")
        await wait_gone(kill_tree(sandbox.pid))
        with pytest.raises(SandboxError, match="died"):
            await sandbox.run_python("1", timeout_s=5)
        backend.config = replace(config, python="/nonexistent/python3")
        for _ in range(2):
            with pytest.raises(SandboxError, match="did not start"):
                await sandbox.run_python("1", timeout_s=5)
        backend.config = config
        result = await sandbox.run_python("print(open('notes.txt').read(), end='')", timeout_s=5)
        assert result.stdout == "kept\n" and result.exit_code == 0
    finally:
        await sandbox.close()
        await backend.close_all()
