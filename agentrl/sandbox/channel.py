"""`WorkerChannel`: the server's end of the unix socket to one sandboxed session worker.

Messages are 4-byte big-endian lengths followed by JSON. The worker's first message carries SCM_CREDENTIALS,
from which the kernel gives the worker's pid as this (host) pid namespace sees it: the server needs it to kill
a worker that ignores its timer. A fork request carries the new worker's socket as SCM_RIGHTS.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from typing import Any

_HEADER = struct.Struct(">I")
_CREDENTIALS = struct.Struct("3i")


class ChannelClosed(ConnectionError):
    """The worker's end of the socket closed: the worker exited or was killed."""


class WorkerChannel:
    """Send a request, read its reply; one request at a time (the caller serializes)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock = sock
        self._loop = asyncio.get_running_loop()

    async def hello(self) -> tuple[dict[str, Any], int]:
        """The worker's greeting and its host pid."""
        await self._readable()
        data, ancillary, _, _ = self.sock.recvmsg(1 << 16, socket.CMSG_SPACE(_CREDENTIALS.size))
        if not data:
            raise ChannelClosed("the sandbox worker exited before it said hello")
        pid = next(
            (_CREDENTIALS.unpack(d)[0] for level, kind, d in ancillary if kind == socket.SCM_CREDENTIALS),
            None,
        )
        if pid is None:
            raise ChannelClosed("the sandbox worker sent no credentials")
        return await self._body(data), pid

    async def request(self, message: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        data = json.dumps(message).encode()
        frame = _HEADER.pack(len(data)) + data
        try:
            if fds:
                await self._send_with_fds(frame, fds)
            else:
                await self._loop.sock_sendall(self.sock, frame)
            header = await self._exactly(_HEADER.size)
            return json.loads(await self._exactly(_HEADER.unpack(header)[0]))
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ChannelClosed(str(exc)) from exc

    def close(self) -> None:
        self.sock.close()

    async def _body(self, data: bytes) -> dict[str, Any]:
        while len(data) < _HEADER.size:
            data += await self._exactly(_HEADER.size - len(data))
        size = _HEADER.unpack(data[: _HEADER.size])[0]
        body = data[_HEADER.size :]
        if len(body) < size:
            body += await self._exactly(size - len(body))
        return json.loads(body)

    async def _exactly(self, size: int) -> bytes:
        parts, remaining = [], size
        while remaining:
            chunk = await self._loop.sock_recv(self.sock, min(remaining, 1 << 20))
            if not chunk:
                raise ChannelClosed("the sandbox worker closed its socket")
            parts.append(chunk)
            remaining -= len(chunk)
        return b"".join(parts)

    async def _send_with_fds(self, frame: bytes, fds: list[int]) -> None:
        while True:
            try:
                sent = socket.send_fds(self.sock, [frame], fds)
                break
            except BlockingIOError:
                await asyncio.sleep(0.001)
        if sent < len(frame):
            await self._loop.sock_sendall(self.sock, frame[sent:])

    async def _readable(self) -> None:
        future = self._loop.create_future()
        self._loop.add_reader(self.sock.fileno(), lambda: future.done() or future.set_result(None))
        try:
            await future
        finally:
            self._loop.remove_reader(self.sock.fileno())
