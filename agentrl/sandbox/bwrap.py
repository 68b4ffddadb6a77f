"""`BwrapBackend`: starts bubblewrap sandboxes on this host and owns everything they leave on disk.

A sandbox is one `bwrap` process with new user, pid, network, ipc, uts and cgroup namespaces; `/usr` and a few
files of `/etc` bound read-only, a private `/tmp`, `/proc`, `/dev`, the root remounted read-only, and the host
directory of its workspaces bound at `/.family`. Inside, `worker.py` runs a keeper and one session worker per
session (see there).

A server that dies takes its sandboxes with it, however it dies. `--die-with-parent` alone does not promise that:
bwrap sets its parent-death signal itself once running, so a server SIGKILLed between the fork and that call leaves
an orphaned bwrap. Each sandbox therefore gets a lifeline, a pipe whose write end only this server holds
(close-on-exec, so no other sandbox or child inherits it): the keeper exits when the read end reaches end of file,
and bwrap then ends the whole sandbox (its monitor exits with the keeper, and with `--die-with-parent` its pid 1
follows, which kills every process of the pid namespace).

When the server runs as root, each sandbox runs as a host uid of its own (from `SandboxConfig.uid_base`), so
RLIMIT_NPROC bounds that sandbox alone, and sandboxes cannot signal each other or read each other's files. As
another user, every sandbox runs as that user and RLIMIT_NPROC is left unset (it would count the server's own
processes too); the pid namespace still hides every process outside the sandbox.

No silent fallback: without `bwrap` on PATH, starting a sandbox raises `SandboxError`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from agentrl.errors import SandboxError
from agentrl.sandbox.channel import WorkerChannel
from agentrl.sandbox.config import SandboxConfig
from agentrl.sandbox.processes import kill_tree
from agentrl.sandbox.result import ExecResult

WORKER_PATH = Path(__file__).with_name("worker.py")
_ETC = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "passwd",
    "group",
    "nsswitch.conf",
    "ssl",
    "ca-certificates",
    "hosts",
)
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/workspace", "LANG": "C.UTF-8", "TERM": "dumb"}
_HELLO_TIMEOUT_S = 20.0
_ROOT_PREFIX = "agentrl-sandboxes-"


@dataclass(eq=False)
class Family:
    """One bwrap process: a session and the sessions forked from it, each with a workspace under `dir`."""

    dir: Path
    uid: int | None
    process: subprocess.Popen
    lifeline: int
    """The write end of the sandbox's lifeline (see the module docstring), closed when the sandbox ends."""
    members: set[str] = field(default_factory=set)
    """Workspace names of the live sessions in this sandbox."""


class BwrapBackend:
    """Starts sandboxes with their root session worker; ends them; cleans their workspaces up."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self._root: Path | None = None
        self._free_uids: list[int] = []
        self._next_uid = config.uid_base
        self.families: set[Family] = set()

    @property
    def root(self) -> Path:
        if self._root is None:
            base = Path(self.config.root_dir or tempfile.gettempdir())
            base.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                _check_traversable(base.resolve())
            remove_orphaned_roots(base)
            root = Path(tempfile.mkdtemp(prefix=f"{_ROOT_PREFIX}{os.getpid()}-", dir=base))
            root.chmod(0o711)  # sandbox uids must reach their own family directory, and list nothing
            # bwrap binds the worker as the sandbox's uid, which may not reach the installed package (a venv under
            # a private home or temp directory): a world-readable copy beside the workspaces always works.
            shutil.copyfile(WORKER_PATH, root / "worker.py")
            (root / "worker.py").chmod(0o644)
            self._root = root
        return self._root

    async def start_family(
        self, network: bool, workspace: Path | None = None
    ) -> tuple[Family, str, WorkerChannel, int]:
        """A new sandbox whose root session uses `workspace` (moved in) or a new empty one."""
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxError("bubblewrap (`bwrap`) is not installed: install the Debian package `bubblewrap`")
        if network and not self.config.allow_network:
            raise SandboxError("this tool server does not allow network access in sandboxes")
        uid = self._take_uid()
        family_dir = self.root / uuid.uuid4().hex
        name = workspace.name if workspace is not None else uuid.uuid4().hex
        try:
            family_dir.mkdir(mode=0o700)
            if workspace is not None:
                await asyncio.to_thread(_move, workspace, family_dir / name, uid)
            else:
                (family_dir / name).mkdir()
            if uid is not None:
                for path in (family_dir, family_dir / name):
                    os.chown(path, uid, uid)
        except OSError as exc:
            await _put_back(family_dir / name, workspace)
            self._release(uid, family_dir)
            raise SandboxError(f"cannot prepare the sandbox's workspace: {exc}") from exc
        ours, theirs = socket.socketpair()
        lifeline_r, lifeline_w = os.pipe()  # both close-on-exec; `pass_fds` hands the read end to this bwrap alone
        try:
            process = await asyncio.to_thread(self._spawn, bwrap, family_dir, name, theirs, lifeline_r, uid, network)
        except OSError as exc:
            ours.close()
            os.close(lifeline_w)
            await _put_back(family_dir / name, workspace)
            self._release(uid, family_dir)
            raise SandboxError(f"cannot start bwrap: {exc}") from exc
        finally:
            theirs.close()
            os.close(lifeline_r)
        family = Family(family_dir, uid, process, lifeline_w, {name})
        self.families.add(family)
        channel = WorkerChannel(ours)
        try:
            _, pid = await asyncio.wait_for(channel.hello(), _HELLO_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError) as exc:
            channel.close()
            await _put_back(family_dir / name, workspace)
            await self.leave(family, name, keep_workspace=True)
            raise SandboxError(f"the sandbox did not start: {exc} (run `bwrap` by hand to see why)") from exc
        return family, name, channel, pid

    async def leave(self, family: Family, name: str, *, keep_workspace: bool = False) -> None:
        """A session leaves its sandbox; the last one to leave ends the sandbox and removes its directory."""
        family.members.discard(name)
        if not keep_workspace:
            await asyncio.to_thread(shutil.rmtree, family.dir / name, True)
        if family.members or family not in self.families:
            return  # still in use, or already ended (its lifeline closed, its uid released: never twice)
        self.families.discard(family)
        kill_tree(family.process.pid)
        await asyncio.to_thread(family.process.wait)
        os.close(family.lifeline)
        self._release(family.uid, family.dir)

    async def close_all(self) -> None:
        for family in list(self.families):
            family.members.clear()
            await self.leave(family, "")
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def bwrap_argv(self, bwrap: str, family_dir: Path, network: bool) -> list[str]:
        argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if network:
            argv += ["--share-net", "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]
        argv += ["--ro-bind", "/usr", "/usr"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64"):
            path = Path("/") / top
            if path.is_symlink():
                argv += ["--symlink", os.readlink(path), str(path)]
            elif path.exists():
                argv += ["--ro-bind", str(path), str(path)]
        for name in _ETC:
            argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/workspace"]
        argv += ["--bind", str(family_dir), "/.family"]
        argv += ["--ro-bind", str(self.root / "worker.py"), "/.agentrl/worker.py"]
        argv += ["--chdir", "/workspace", "--remount-ro", "/"]
        return argv

    async def run_once(self, code: str, timeout_s: float) -> ExecResult:
        """Start a fresh sandbox running `python3 -c code` and wait for it (the per-call-process pattern)."""
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxError("bubblewrap (`bwrap`) is not installed")
        scratch = self.root / "once"
        scratch.mkdir(exist_ok=True)
        # No keeper and no lifeline here: this is one process with a deadline, and a keeper would add a second
        # interpreter start to every call, the cost this pattern exists to measure. `timeout` gives a bwrap
        # orphaned by a dying server (see the module docstring) the deadline the server would have enforced.
        deadline_s = timeout_s + self.config.kill_grace_s
        argv = self.bwrap_argv(bwrap, scratch, False)
        argv += ["timeout", "--signal=KILL", f"{deadline_s:g}", self.config.python, "-c", code]
        process = await asyncio.create_subprocess_exec(
            *argv, env=_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout_s)
        except TimeoutError:
            kill_tree(process.pid)
            await process.wait()
            return ExecResult(exit_code=None, timed_out=True)
        return ExecResult(
            stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"), exit_code=process.returncode
        )

    def _spawn(
        self,
        bwrap: str,
        family_dir: Path,
        name: str,
        sock: socket.socket,
        lifeline: int,
        uid: int | None,
        network: bool,
    ) -> subprocess.Popen:
        limits = {"rlimits": self.config.rlimits(), "output_bytes": self.config.output_bytes}
        if uid is None:
            limits["rlimits"].pop("RLIMIT_NPROC")
        fd = sock.fileno()
        argv = self.bwrap_argv(bwrap, family_dir, network)
        argv += [self.config.python, "/.agentrl/worker.py", str(lifeline), str(fd), name, json.dumps(limits)]
        quiet = None if os.environ.get("AGENTRL_SANDBOX_DEBUG") else subprocess.DEVNULL
        identity = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
        return subprocess.Popen(
            argv,
            env=_ENV,
            pass_fds=(lifeline, fd),
            stdin=subprocess.DEVNULL,
            stdout=quiet,
            stderr=quiet,
            start_new_session=True,
            **identity,
        )

    def _take_uid(self) -> int | None:
        if os.geteuid() != 0:
            return None
        if self._free_uids:
            return self._free_uids.pop()
        self._next_uid += 1
        return self._next_uid - 1

    def _release(self, uid: int | None, family_dir: Path) -> None:
        shutil.rmtree(family_dir, ignore_errors=True)
        if uid is not None:
            self._free_uids.append(uid)


def _check_traversable(path: Path) -> None:
    """Sandboxes run as uids of their own, which must be able to walk down to their workspace."""
    for directory in (path, *path.parents):
        if not directory.stat().st_mode & 0o001:
            raise SandboxError(
                f"sandbox workspaces cannot live under {path}: {directory} is not searchable by other users "
                "(sandboxes run as uids of their own); choose another sandbox.root_dir"
            )


def remove_orphaned_roots(base: Path) -> None:
    """Remove the workspace roots of tool servers that died without cleaning up (their pid is gone).

    Sandboxes themselves die with their server (their lifeline); only their directories can outlive it.
    """
    for path in base.glob(f"{_ROOT_PREFIX}*-*"):
        pid = path.name[len(_ROOT_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)


async def _put_back(moved: Path, workspace: Path | None) -> None:
    """After a start that failed: a workspace that was moved in goes back where it came from, so the session's
    files survive the sandbox's removal and its next call can try again."""
    if workspace is not None and moved.exists() and not workspace.exists():
        await asyncio.to_thread(os.rename, moved, workspace)


def _move(source: Path, target: Path, uid: int | None) -> None:
    os.rename(source, target)
    if uid is None:
        return
    for directory, dirs, files in os.walk(target):
        os.lchown(directory, uid, uid)
        for entry in files + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            os.lchown(os.path.join(directory, entry), uid, uid)
