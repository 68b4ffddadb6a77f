"""The process that runs inside a bubblewrap sandbox: a keeper, and one session worker per session.

This file runs under the sandbox's own `python3` (the system interpreter, bound read-only), so it uses the
standard library only and imports nothing from agentrl. The tool server starts it as

    python3 /.agentrl/worker.py LIFELINE_FD FD WORKSPACE_NAME LIMITS_JSON

The first process (the keeper) forks the root session worker and then waits for the server to go: bubblewrap
ends the whole sandbox when its first child exits, so the keeper outlives every session of the sandbox, while
sessions come and go. LIFELINE_FD is the read end of a pipe whose only write end the server holds; it reaches end
of file when the server closes the sandbox or dies, however it died, and then the keeper exits, ending the
sandbox. Session workers exit at the end of their sockets, but what they started (a shell's background job, a
fork's processes) would otherwise live on. A session worker:

- moves into a user + mount namespace of its own and binds `/.family/WORKSPACE_NAME` over `/workspace`, so every
  session of a sandbox sees its own workspace at the same path;
- announces itself with SCM_CREDENTIALS, which tells the server its pid as the host sees it (for killing);
- serves length-prefixed JSON requests on its socket: `python` (a persistent namespace, like a REPL: the value
  of a final expression is returned), `shell` (a persistent bash), `exec` (a one-off process), `read`, `write`,
  `fork`.

`fork` receives a fresh socket (SCM_RIGHTS) and double-forks: the grandchild, reparented to the sandbox's init,
keeps a copy of the interpreter's memory, joins a new mount namespace bound to the new workspace, restores
the shell's cwd and exported environment in a new bash, and serves the new socket.
"""

import ast
import ctypes
import io
import json
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import traceback

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_RELATIME = 1 << 21
FAMILY = "/.family"
WORKSPACE = "/workspace"
_libc = ctypes.CDLL(None, use_errno=True)


class CallTimeout(BaseException):
    """Raised inside user code when the per-call timer fires (a BaseException so `except Exception` misses it)."""


def _check(ret, what):
    if ret != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def enter_workspace(name, new_user_namespace):
    """Bind this session's workspace over /workspace in a mount namespace of its own; keep the relative cwd."""
    try:
        relative = os.path.relpath(os.getcwd(), WORKSPACE)
    except (OSError, ValueError):
        relative = "."
    if new_user_namespace:
        uid, gid = os.getuid(), os.getgid()
        _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
        for path, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open("/proc/self/" + path, "w") as f:
                f.write(text)
    else:
        _check(_libc.unshare(CLONE_NEWNS), "unshare")
    source = os.path.join(FAMILY, name).encode()
    _check(_libc.mount(source, WORKSPACE.encode(), None, MS_BIND | MS_REC, None), "mount")
    # A fork's bind comes from a read-only /.family (below), so make the workspace writable explicitly; then
    # close /.family to this session, so that nothing outside /workspace (and the private /tmp) is writable.
    _remount(WORKSPACE, read_only=False)
    _remount(FAMILY, read_only=True)
    target = os.path.normpath(os.path.join(WORKSPACE, relative))
    os.chdir(target if relative != ".." and not relative.startswith("../") and os.path.isdir(target) else WORKSPACE)


def _remount(path, read_only):
    """Change only the read-only flag of a bind mount: the kernel refuses a remount that would drop the
    nosuid/nodev/noexec/atime flags the outer sandbox locked, so they are carried over."""
    flags = os.statvfs(path).f_flag
    kept = flags & (os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC | os.ST_NOATIME | os.ST_NODIRATIME)
    if flags & os.ST_RELATIME:
        kept |= MS_RELATIME
    mode = MS_RDONLY if read_only else 0
    _check(_libc.mount(None, path.encode(), None, MS_REMOUNT | MS_BIND | kept | mode, None), "remount " + path)


def set_limits(limits):
    for name, value in limits.get("rlimits", {}).items():
        resource.setrlimit(getattr(resource, name), (value, value))
    # A write past RLIMIT_FSIZE then fails with EFBIG instead of killing the writer.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


class Channel:
    """Length-prefixed JSON messages on a connected unix socket."""

    def __init__(self, sock):
        self.sock = sock

    def hello(self, info):
        data = json.dumps(info).encode()
        creds = struct.pack("3i", os.getpid(), os.getuid(), os.getgid())
        self.sock.sendmsg([struct.pack(">I", len(data)) + data], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])

    def send(self, message):
        data = json.dumps(message).encode()
        self.sock.sendall(struct.pack(">I", len(data)) + data)

    def receive(self):
        """The next message and the file descriptors that came with it (None at end of stream)."""
        header, fds, _, _ = socket.recv_fds(self.sock, 4, 4)
        if not header:
            return None, []
        while len(header) < 4:
            more = self.sock.recv(4 - len(header))
            if not more:
                return None, fds
            header += more
        size = struct.unpack(">I", header)[0]
        chunks, remaining = [], size
        while remaining:
            chunk = self.sock.recv(min(remaining, 1 << 20))
            if not chunk:
                return None, fds
            chunks.append(chunk)
            remaining -= len(chunk)
        return json.loads(b"".join(chunks)), fds


class Capture:
    """File descriptors 1 and 2 pointed at memory files for one call, so subprocess output is captured too."""

    def __init__(self, limit_bytes):
        self.limit_bytes = limit_bytes

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.files = [os.memfd_create("out"), os.memfd_create("err")]
        self.saved = [os.dup(1), os.dup(2)]
        os.dup2(self.files[0], 1)
        os.dup2(self.files[1], 2)
        return self

    def __exit__(self, *exc):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        for fd in self.saved:
            os.close(fd)

    def read(self):
        """(stdout, stderr, bytes dropped) with each stream cut to the limit."""
        texts, dropped = [], 0
        for fd in self.files:
            size = os.fstat(fd).st_size
            data = os.pread(fd, self.limit_bytes, 0)
            dropped += max(0, size - len(data))
            texts.append(data.decode("utf-8", "replace"))
            os.close(fd)
        return texts[0], texts[1], dropped


class Interpreter:
    """A persistent namespace; `run` executes code like a REPL cell, with a soft per-call timer."""

    def __init__(self, limit_bytes):
        self.namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        self.limit_bytes = limit_bytes
        sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(open(2, "wb", closefd=False), write_through=True)

    def run(self, code, timeout_s):
        value, error, timed_out = None, None, False
        with Capture(self.limit_bytes) as capture:
            signal.signal(signal.SIGALRM, _raise_timeout)
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
            try:
                value = self._execute(code)
            except CallTimeout:
                timed_out = True
                kill_strays()
            except BaseException:  # noqa: BLE001 - the user's exception is the result
                error = traceback.format_exc()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
            if error:
                sys.stderr.write(_strip_worker_frames(error))
        stdout, stderr, dropped = capture.read()
        return {
            "stdout": stdout,
            "stderr": stderr,
            "value": value,
            "exit_code": None if timed_out else 1 if error else 0,
            "timed_out": timed_out,
            "truncated_bytes": dropped,
        }

    def _execute(self, code):
        tree = ast.parse(code, "<cell>", "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<cell>", "exec"), self.namespace)
        if last is None:
            return None
        value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), self.namespace)
        return None if value is None else repr(value)[: self.limit_bytes]


def kill_strays():
    """Kill what a timed-out cell left running in the worker's process group (a fork bomb, a hung child),
    sparing the worker; repeated until none is left, since the strays may still be forking."""
    me, group = os.getpid(), os.getpgrp()
    for _ in range(1000):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) == group:
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not found:
            return


def _raise_timeout(signum, frame):
    raise CallTimeout()


def _strip_worker_frames(text):
    lines = text.splitlines(True)
    keep = [lines[0]]
    skipping = False
    for line in lines[1:]:
        if line.startswith('  File "') and not line.startswith('  File "<cell>"'):
            skipping = True
            continue
        if skipping and line.startswith("    "):
            continue
        skipping = False
        keep.append(line)
    return "".join(keep)


class Shell:
    """A persistent bash: cwd, variables and functions survive between commands; a timeout restarts it."""

    def __init__(self, limit_bytes, setup=""):
        self.limit_bytes = limit_bytes
        self.setup = setup
        self.cwd = None
        self.process = None
        self.marker = os.urandom(8).hex()

    def _start(self):
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.cwd or os.getcwd(),
        )
        if self.setup:
            self._run(self.setup, 10.0)
            self.setup = ""

    def state(self):
        """Shell commands that rebuild this shell's cwd, exported variables and functions elsewhere."""
        if self.process is None:
            return self.setup
        out = self._run("export -p; declare -f", 10.0)
        return out["stdout"] + f"\ncd {_quote(self.cwd or WORKSPACE)}\n"

    def run(self, command, timeout_s):
        if self.process is None or self.process.poll() is not None:
            self._start()
        return self._run(command, timeout_s)

    def _run(self, command, timeout_s):
        end = f"__agentrl_{self.marker}__"
        script = f"eval {_quote(command)} </dev/null 2>&1\nprintf '\\n{end} %d %s\\n' $? \"$PWD\"\n"
        self.process.stdin.write(script.encode())
        self.process.stdin.flush()
        kept, dropped, tail = bytearray(), 0, b""
        needle = ("\n" + end + " ").encode()
        deadline = _now() + timeout_s
        fd = self.process.stdout.fileno()
        while True:
            left = deadline - _now()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.kill()
                return {
                    "stdout": bytes(kept).decode("utf-8", "replace"),
                    "stderr": "",
                    "exit_code": None,
                    "timed_out": True,
                    "truncated_bytes": dropped,
                    "cwd": self.cwd,
                }
            chunk = os.read(fd, 65536)
            if not chunk:
                self.process = None
                return {
                    "stdout": bytes(kept).decode("utf-8", "replace"),
                    "stderr": "bash exited\n",
                    "exit_code": None,
                    "timed_out": False,
                    "truncated_bytes": dropped,
                    "cwd": self.cwd,
                }
            tail += chunk
            at = tail.find(needle)
            if at >= 0 and tail.endswith(b"\n") and tail.count(b"\n", at + 1) == 1:
                body, status = tail[:at], tail[at + len(needle) :].decode().rstrip("\n").split(" ", 1)
                kept, dropped = _keep(kept, dropped, body, self.limit_bytes)
                self.cwd = status[1] if len(status) > 1 else self.cwd
                return {
                    "stdout": bytes(kept).decode("utf-8", "replace"),
                    "stderr": "",
                    "exit_code": int(status[0]),
                    "timed_out": False,
                    "truncated_bytes": dropped,
                    "cwd": self.cwd,
                }
            # Keep enough of the tail to find a marker split across reads.
            if len(tail) > 4 * len(needle) + 64:
                cut = len(tail) - 2 * len(needle) - 64
                kept, dropped = _keep(kept, dropped, tail[:cut], self.limit_bytes)
                tail = tail[cut:]

    def kill(self):
        if self.process is not None:
            # Loop: a fork bomb adds members while the group is being killed.
            for _ in range(1000):
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    break
            self.process.wait()
            self.process = None


def _keep(kept, dropped, data, limit):
    room = max(0, limit - len(kept))
    kept += data[:room]
    return kept, dropped + max(0, len(data) - room)


def _quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def _now():
    import time

    return time.monotonic()


class Worker:
    """One session: its socket, its interpreter and its shell."""

    def __init__(self, channel, limits):
        self.channel = channel
        self.limits = limits
        self.output_limit = limits.get("output_bytes", 16384)
        self.interpreter = Interpreter(self.output_limit)
        self.shell = Shell(self.output_limit)

    def serve(self):
        self.channel.hello({"pid": os.getpid()})
        while True:
            message, fds = self.channel.receive()
            if message is None:
                self.shell.kill()
                os._exit(0)
            op = message.get("op")
            try:
                if op == "fork":
                    reply = self.fork(message, fds)
                else:
                    reply = getattr(self, "op_" + op)(message)
            except OSError as exc:
                # The request's own fault (no such file, a directory, no permission): a failed call, not a
                # broken sandbox.
                reply = {"error": f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), "user_error": True}
            except Exception as exc:  # noqa: BLE001 - reported to the server, which turns it into a result
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            self.channel.send(reply)

    def op_ping(self, message):
        return {"ok": True}

    def op_python(self, message):
        return self.interpreter.run(message["code"], float(message["timeout_s"]))

    def op_shell(self, message):
        return self.shell.run(message["command"], float(message["timeout_s"]))

    def op_exec(self, message):
        try:
            done = subprocess.run(
                message["argv"],
                input=(message.get("stdin") or "").encode(),
                capture_output=True,
                timeout=float(message["timeout_s"]),
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            return {
                "stdout": _cut(exc.stdout, self.output_limit),
                "stderr": _cut(exc.stderr, self.output_limit),
                "exit_code": None,
                "timed_out": True,
                "truncated_bytes": 0,
            }
        except OSError as exc:
            return {"stdout": "", "stderr": str(exc), "exit_code": 127, "timed_out": False, "truncated_bytes": 0}
        dropped = max(0, len(done.stdout) - self.output_limit) + max(0, len(done.stderr) - self.output_limit)
        return {
            "stdout": _cut(done.stdout, self.output_limit),
            "stderr": _cut(done.stderr, self.output_limit),
            "exit_code": done.returncode,
            "timed_out": False,
            "truncated_bytes": dropped,
        }

    def op_read(self, message):
        with open(message["path"], "rb") as f:
            data = f.read(int(message.get("max_bytes", 1 << 24)) + 1)
        return {"data": data.decode("utf-8", "replace"), "binary": b"\0" in data[:8192]}

    def op_write(self, message):
        path = message["path"]
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(message["data"])
        return {"ok": True}

    def fork(self, message, fds):
        if len(fds) != 1:
            return {"error": "fork needs exactly one socket"}
        shell_state = self.shell.state()
        child = os.fork()
        if child == 0:
            try:
                if os.fork() != 0:
                    os._exit(0)
                os.setsid()
                self.channel.sock.close()
                self.shell.process = None  # the parent's bash stays the parent's
                enter_workspace(message["workspace"], new_user_namespace=False)
                self.channel = Channel(socket.socket(fileno=fds[0]))
                self.shell = Shell(self.output_limit, setup=shell_state)
                self.serve()
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                os._exit(1)
        os.close(fds[0])
        os.waitpid(child, 0)
        return {"ok": True}


def _cut(data, limit):
    return (data or b"")[:limit].decode("utf-8", "replace")


def keeper(lifeline, fd, name, limits):
    """The sandbox's first process: start the root session worker, reap it, and exit when the lifeline ends."""
    child = os.fork()
    if child == 0:
        try:
            os.close(lifeline)
            os.setsid()
            set_limits(limits)
            enter_workspace(name, new_user_namespace=True)
            Worker(Channel(socket.socket(fileno=fd)), limits).serve()
        except BaseException:  # noqa: BLE001 - shown with AGENTRL_SANDBOX_DEBUG=1 (stderr is discarded otherwise)
            traceback.print_exc()
        finally:
            os._exit(1)
    os.close(fd)
    # A pidfd, not SIGCHLD: one blocking wait covers the lifeline and the root worker's exit, with no signal
    # handler for session workers to inherit. Forked sessions are not the keeper's children: bubblewrap's pid 1
    # reaps them.
    watched = [lifeline]
    try:
        watched.append(os.pidfd_open(child))
    except OSError:
        pass  # a kernel before 5.3 has no pidfds: the root worker then stays a zombie until the sandbox ends
    while True:
        ready = select.select(watched, [], [])[0]
        if lifeline in ready:
            os._exit(0)  # nothing is ever written: readable means end of file, the server is gone or done with us
        os.waitpid(child, 0)
        os.close(watched.pop())


if __name__ == "__main__":
    os.chdir(WORKSPACE)
    keeper(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]))
