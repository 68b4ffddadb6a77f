"""Hostile code against the local (bubblewrap) sandbox. After each attack, a bystander session must still be
served promptly and correctly: one session's sandbox is never another's problem."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path
from textwrap import dedent

import pytest

from agentrl.sandbox.config import SandboxConfig
from agentrl.sandbox.processes import descendants
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient
from agentrl.toolserver.config import ToolServerConfig
from agentrl.types import ToolCall

pytestmark = pytest.mark.integration

SPECS = ["agentrl.tools.code:PythonInterpreter", "agentrl.tools.terminal:Shell", "agentrl.tools.files:FileEditor"]
LIMITS = SandboxConfig(call_timeout_s=3.0, kill_grace_s=1.0, memory_mb=512, file_size_mb=8, processes=64)


@pytest.fixture
async def tools():
    root = Path(tempfile.mkdtemp(prefix="agentrl-security-"))
    root.chmod(0o755)
    config = ToolServerConfig(sandbox=SandboxConfig(**{**LIMITS.__dict__, "root_dir": str(root)}))
    app = create_app(SPECS, config=config)
    async with ToolClient(app=app, timeout_s=30.0) as client:
        client.app = app
        client.root = root
        yield client
        await app.state.tool_server.close_all()
    leftovers = [p for p in descendants(os.getpid())[1:] if _is_sandbox(p)]
    shutil.rmtree(root, ignore_errors=True)
    assert not leftovers, f"sandbox processes outlived the server: {leftovers}"


def _is_sandbox(pid: int) -> bool:
    try:
        return (
            b"bwrap" in Path(f"/proc/{pid}/cmdline").read_bytes()
            or b"worker.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
        )
    except OSError:
        return False


async def run(session, name: str, **arguments):
    return await session.call(ToolCall(id=os.urandom(6).hex(), name=name, arguments=arguments))


async def attack(tools, name: str, **arguments):
    """Run the attack in a session of its own, then prove a bystander session is unharmed."""
    bystander = await tools.open_session()
    await run(bystander, "python", code="secret = 'bystander-ok'")
    attacker = await tools.open_session()
    result = await run(attacker, name, **arguments)
    check = await run(bystander, "python", code="secret")
    assert check.text == "Out: 'bystander-ok'" and check.elapsed_s < 1.0, check
    return result, attacker


async def test_network_is_unreachable(tools) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        code = dedent(f"""
            import socket
            for host in ('127.0.0.1', '1.1.1.1'):
                try:
                    socket.create_connection((host, {port}), timeout=2)
                    print('connected', host)
                except OSError as e:
                    print('blocked', host, e.errno)
        """)
        result, _ = await attack(tools, "python", code=code)
    finally:
        listener.close()
    assert "connected" not in result.text and result.text.count("blocked") == 2


async def test_writes_outside_the_workspace_fail(tools) -> None:
    code = dedent("""
        for path in ('/etc/agentrl', '/usr/agentrl', '/agentrl', '/.family/x', '/.agentrl/worker.py'):
            try:
                open(path, 'w').write('x')
                print('wrote', path)
            except OSError as e:
                print('denied', path)
    """)
    result, _ = await attack(tools, "python", code=code)
    assert "wrote" not in result.text and result.text.count("denied") == 5
    escape, _ = await attack(tools, "create_file", path="../../etc/owned", content="x")
    assert escape.is_error


async def test_server_files_and_other_workspaces_are_unreadable(tools) -> None:
    victim = await tools.open_session()
    await run(victim, "create_file", path="secret.txt", content="victim-secret")
    host_workspace = tools.app.state.tool_server.sessions[victim.session_id].sandbox._inner.host_workspace
    targets = [str(host_workspace / "secret.txt"), __file__, "/proc/1/environ", str(tools.root)]
    code = (
        "import os, glob\n"
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        open(path).read() if not os.path.isdir(path) else os.listdir(path)\n"
        "        print('read', path)\n"
        "    except OSError:\n        print('denied', path)\n"
        "print(sorted(glob.glob('/.family/*')).__len__(), 'workspaces visible')"
    )
    result, _ = await attack(tools, "python", code=code)
    assert "read " not in result.text and result.text.count("denied") == 4
    assert "1 workspaces visible" in result.text
    grep, _ = await attack(tools, "bash", command="grep -rs victim-secret / 2>/dev/null | head -3; echo done")
    assert "victim-secret" not in grep.text


@pytest.mark.skipif(os.geteuid() != 0, reason="RLIMIT_NPROC per sandbox needs a uid per sandbox (server as root)")
async def test_fork_bomb_is_contained(tools) -> None:
    result, attacker = await attack(
        tools, "python", code="import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    )
    assert result.is_error and result.error_type == "timeout"
    assert (await run(attacker, "bash", command="echo alive")).text == "alive"


async def test_memory_bomb_is_contained(tools) -> None:
    result, attacker = await attack(
        tools, "python", code="blocks = []\nwhile True:\n    blocks.append(bytearray(50 << 20))"
    )
    assert "MemoryError" in result.text
    assert (await run(attacker, "python", code="del blocks\nprint('fine')")).text == "fine"


async def test_infinite_loops_are_killed_at_the_timeout(tools) -> None:
    result, attacker = await attack(tools, "bash", command="trap '' TERM INT; while :; do :; done")
    assert result.is_error and result.error_type == "timeout" and result.elapsed_s < 6.0
    result, _ = await attack(
        tools, "python", code="import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True: pass"
    )
    assert result.is_error and result.error_type == "timeout" and result.elapsed_s < 6.0


async def test_output_flood_is_truncated(tools) -> None:
    result, _ = await attack(tools, "bash", command="yes flood | head -c 200000000")
    assert "more bytes of output were cut" in result.text and len(result.text) < 20_000


async def test_signalling_the_parent_or_everything_fails_safely(tools) -> None:
    # The server's pid (this process) does not exist inside the sandbox's pid namespace.
    code = dedent(f"""
        import os, signal
        try:
            os.kill({os.getpid()}, signal.SIGKILL)
        except ProcessLookupError:
            print('no such process')
    """)
    result, attacker = await attack(tools, "python", code=code)
    assert result.text == "no such process"
    # Killing the worker's own parent or every process it may signal only brings its own sandbox down: that
    # call is a sandbox_error, and the next call gets a fresh worker.
    for name, arguments in (
        ("python", {"code": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time; time.sleep(5)"}),
        ("bash", {"command": "kill -9 -1; sleep 5"}),
    ):
        result, attacker = await attack(tools, name, **arguments)
        assert result.is_error and result.error_type == "sandbox_error", result
        assert (await run(attacker, "python", code="print('restarted')")).text == "restarted"


async def test_huge_file_write_stops_at_the_size_limit(tools) -> None:
    code = dedent("""
        try:
            with open('big.bin', 'wb') as f:
                for _ in range(100):
                    f.write(b'x' * (1 << 20))
        except OSError as e:
            print('stopped', e.strerror)
        import os
        print(os.path.getsize('big.bin') >> 20, 'MB')
    """)
    result, _ = await attack(tools, "python", code=code)
    assert "stopped File too large" in result.text and "8 MB" in result.text
