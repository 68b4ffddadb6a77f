"""A tool server that dies leaves no bubblewrap sandbox behind, however it dies and whenever.

`--die-with-parent` is set by bwrap itself once it runs, so a server SIGKILLed between its fork and that call
orphans the bwrap; the lifeline (a pipe whose write end only the server holds, watched by the sandbox's keeper)
ends such a sandbox anyway. To hit that window every time rather than by luck, the servers here find a `bwrap`
first on their PATH that sleeps before it runs the real one: a sandbox "still starting" when its server is killed
is then one whose bwrap starts after its parent is gone.

Sandboxes are found by their bwrap's argv, which names this test's own workspace root (so parallel tests do not
see each other's), and every process below them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentrl.sandbox.processes import alive, descendants, kill_tree
from agentrl.toolserver.client import ToolClient
from agentrl.types import ToolCall

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed here"),
]

SLOW_START_S = 1.5
"""How long the slow `bwrap` waits before it runs the real one: the window in which its server is killed."""
GONE_WITHIN_S = 30.0
"""How long an orphaned sandbox may take to notice and end (generous: this is a wait, not a timing check)."""


@pytest.fixture
def root() -> Iterator[Path]:
    """A workspace root that sandbox uids can reach (pytest's own temp dirs are private to their owner)."""
    path = Path(tempfile.mkdtemp(prefix="agentrl-lifeline-"))
    path.chmod(0o755)
    yield path
    for pid in sandbox_processes(path):  # what a failed test left: ours alone, by the root in their argv
        kill_tree(pid)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def slow_path(root: Path) -> str:
    """A PATH whose `bwrap` sleeps SLOW_START_S, then runs the real one (argv and file descriptors unchanged)."""
    shim_dir = root / "slow-bwrap"
    shim_dir.mkdir()
    shim = shim_dir / "bwrap"
    shim.write_text(f'#!/bin/sh\n{shutil.which("sleep")} {SLOW_START_S}\nexec {shutil.which("bwrap")} "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return f"{shim_dir}{os.pathsep}{os.environ['PATH']}"


def marker(root: Path) -> bytes:
    """What the argv of every bwrap (slow or real) of a server using `root` contains, and a server's does not."""
    return f"{root}/agentrl-sandboxes-".encode()


def sandbox_processes(root: Path) -> dict[int, str]:
    """Live processes of the sandboxes under `root`: each bwrap whose argv names it, and everything below."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and marker(root) in _cmdline(int(entry)):
            for pid in descendants(int(entry)):
                if alive(pid):
                    found[pid] = _cmdline(pid).replace(b"\0", b" ").decode(errors="replace")[:200]
    return found


def wait_for_no_sandbox(root: Path) -> dict[int, str]:
    """The sandbox processes under `root` still alive after waiting at most GONE_WITHIN_S (none, normally)."""
    deadline = time.monotonic() + GONE_WITHIN_S
    left = sandbox_processes(root)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = sandbox_processes(root)
    return left


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def pipe_ends(pid: int) -> dict[int, str]:
    """The pipes `pid` has open, by inode: "r" or "w" for the access it holds (both: "w")."""
    ends: dict[int, str] = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return ends
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            flags = Path(f"/proc/{pid}/fdinfo/{fd}").read_text().split("flags:", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if target.startswith("pipe:["):
            inode = int(target[6:-1])
            ends[inode] = "w" if int(flags, 8) & os.O_ACCMODE or ends.get(inode) == "w" else "r"
    return ends


def inner_pid(pid: int) -> int:
    """`pid` as its innermost pid namespace sees it (the keeper is the sandbox's pid 2)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    raise AssertionError(f"no NSpid for {pid}")


def assert_lifelines_held_by_server_alone(server_pid: int, root: Path) -> None:
    """Each keeper, and nothing else in a sandbox, holds a lifeline, for reading only; its write end is the
    server's alone; every sandbox has a lifeline of its own."""
    written_by_server = {inode for inode, end in pipe_ends(server_pid).items() if end == "w"}
    processes = sandbox_processes(root)
    keepers = {pid for pid, cmd in processes.items() if "/.agentrl/worker.py" in cmd and inner_pid(pid) == 2}
    held: dict[int, dict[int, str]] = {}
    for pid in processes:
        lifelines = {inode: end for inode, end in pipe_ends(pid).items() if inode in written_by_server}
        if lifelines:
            held[pid] = lifelines
    assert keepers, f"no keeper found among {processes}"
    assert set(held) == keepers, f"lifelines held by {held}, keepers are {keepers}: {processes}"
    assert all(ends == {next(iter(ends)): "r"} for ends in held.values()), held
    assert len({inode for ends in held.values() for inode in ends}) == len(keepers), held


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve_tools(root: Path, path: str) -> tuple[subprocess.Popen[bytes], str]:
    """`agentrl serve-tools --tools code` on 127.0.0.1 with its workspaces under `root`, once healthy."""
    port = free_port()
    command = [sys.executable, "-m", "agentrl.cli.app", "serve-tools", "--tools", "code", "--port", str(port)]
    command += ["--set", f"sandbox.root_dir={root}"]
    process = subprocess.Popen(command, env={**os.environ, "PATH": path}, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, f"serve-tools exited with {process.returncode}"
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise TimeoutError("serve-tools did not start")


async def python(session, code: str):
    return await session.call(ToolCall(id=os.urandom(6).hex(), name="python", arguments={"code": code}))


async def test_a_sigkilled_tool_server_leaves_no_sandbox(root: Path, slow_path: str) -> None:
    server, url = serve_tools(root, slow_path)
    try:
        async with ToolClient(url, timeout_s=60.0, retries=0) as tools:
            running = [await tools.open_session() for _ in range(3)]
            # One sandbox first, then two more: later sandboxes must not hold an earlier one's lifeline.
            results = [await python(running[0], "print('up')")]
            results += await asyncio.gather(*(python(s, "print('up')") for s in running[1:]))
            assert [r.text for r in results] == ["up"] * 3, results
            # What a session started lives past its worker's end of socket unless the whole sandbox ends.
            await python(running[0], "import subprocess; subprocess.Popen(['sleep', '1000'], start_new_session=True)")
            forked = await running[1].fork()
            assert (await python(forked, "print('forked')")).text == "forked"
            assert_lifelines_held_by_server_alone(server.pid, root)

            starting = [await tools.open_session() for _ in range(3)]
            calls = [asyncio.create_task(python(s, "print('late')")) for s in starting]
            deadline = time.monotonic() + 20
            while _slow_starts(root) < len(starting) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert _slow_starts(root) >= 1, "no sandbox was caught starting"
            server.send_signal(signal.SIGKILL)
            server.wait()
            await asyncio.gather(*calls, return_exceptions=True)
        left = wait_for_no_sandbox(root)
        assert not left, f"sandboxes outlived their SIGKILLed server: {left}"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def _slow_starts(root: Path) -> int:
    """Sandboxes whose slow bwrap has not yet run the real one (its shell's argv names the shim)."""
    shim = f"{root}/slow-bwrap/bwrap".encode()
    return sum(shim in _cmdline(pid) for pid in sandbox_processes(root))


SPAWN_AND_DIE = textwrap.dedent("""
    import asyncio, os, signal
    from agentrl.sandbox.bwrap import BwrapBackend
    from agentrl.sandbox.config import SandboxConfig

    async def main():
        backend = BwrapBackend(SandboxConfig(root_dir=os.environ["SANDBOX_ROOT"]))
        starts = [asyncio.ensure_future(backend.start_family(network=False)) for _ in range(3)]
        while not backend.families:  # the first bwrap is spawned; the others may be mid-fork
            await asyncio.sleep(0)
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
""")


@pytest.mark.parametrize("start", ["real", "slow"])
def test_a_sandbox_spawned_just_before_its_server_is_killed_ends(root: Path, slow_path: str, start: str) -> None:
    """The race itself: the spawning process dies right after its first bwrap is spawned. With the real bwrap
    this may or may not land before bwrap's own `--die-with-parent`; with the slow one it always does."""
    path = slow_path if start == "slow" else os.environ["PATH"]
    env = {**os.environ, "PATH": path, "SANDBOX_ROOT": str(root)}
    child = subprocess.run([sys.executable, "-c", SPAWN_AND_DIE], env=env, timeout=120)
    assert child.returncode == -signal.SIGKILL, child
    if start == "slow":
        assert sandbox_processes(root), "the slow bwraps should still be starting"
    left = wait_for_no_sandbox(root)
    assert not left, f"sandboxes outlived the process that spawned them: {left}"


RUN_ONCE_AND_DIE = textwrap.dedent("""
    import asyncio, os, signal
    from agentrl.sandbox.bwrap import BwrapBackend
    from agentrl.sandbox.config import SandboxConfig
    from agentrl.sandbox.processes import descendants

    async def main():
        config = SandboxConfig(root_dir=os.environ["SANDBOX_ROOT"], kill_grace_s=0.5)
        backend = BwrapBackend(config)
        task = asyncio.ensure_future(backend.run_once("import time; time.sleep(1000)", timeout_s=1.0))
        while len(descendants(os.getpid())) < 2:  # the slow bwrap is spawned
            await asyncio.sleep(0.001)
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
""")


def test_an_orphaned_one_shot_sandbox_ends_at_its_deadline(root: Path, slow_path: str) -> None:
    """`run_once` has no keeper: its orphan is bounded by the call's deadline instead of its server's life."""
    env = {**os.environ, "PATH": slow_path, "SANDBOX_ROOT": str(root)}
    child = subprocess.run([sys.executable, "-c", RUN_ONCE_AND_DIE], env=env, timeout=120)
    assert child.returncode == -signal.SIGKILL, child
    deadline = time.monotonic() + GONE_WITHIN_S
    while not any(cmd.startswith("python3 -c") for cmd in sandbox_processes(root).values()):
        assert time.monotonic() < deadline, "the orphaned one-shot sandbox never ran its code"
        time.sleep(0.05)
    left = wait_for_no_sandbox(root)
    assert not left, f"a one-shot sandbox outlived its deadline: {left}"
