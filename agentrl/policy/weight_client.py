"""`AgentrlWeightClient`: pushes the learner's weights to `agentrl serve`'s weight-update endpoint.

The protocol is `agentrl/serve/weights.py`'s: `GET /admin/weights` says whether the server takes updates, whether our
token is accepted, its weight version and dtype; `POST /admin/weights` with `Authorization: Bearer TOKEN` and the
bytes of one safetensors file (`application/octet-stream`) applies them between requests and returns the new
version. The weights always travel in the request body, never as a path: that works whether or not the server
shares the trainer's filesystem, at the cost of holding one serialized copy of the update in memory on each side.
Tensors are cast to the server's dtype before they travel.

Every update must move the server's version by exactly one: a larger step means another client updates the same
server, and the run stops rather than sample from weights that are not its own. A version that went back means the
server restarted (from the weights it was started with): the update just sent, all the learner's changing weights,
puts it back on the learner's weights, so it is counted in `restarts` and the run goes on.

`push` is `send(encode(tensors))`; a pool of servers encodes once per dtype and sends the same bytes to each.
"""

from __future__ import annotations

from typing import Any

from agentrl.errors import ConfigError, SamplerError
from agentrl.serve.weights import WEIGHTS_ROUTE

CHECK_TIMEOUT_S = 10.0
PUSH_TIMEOUT_S = 600.0
"""An update waits for the server's requests in flight before it applies, so it may take a while."""


class AgentrlWeightClient:
    """One `agentrl serve` that takes weight updates; `connect()` checks it can before training starts."""

    name = "agentrl"

    def __init__(self, root_url: str, token: str | None):
        self.root_url = root_url.rstrip("/")
        self.url = self.root_url + WEIGHTS_ROUTE
        self.token = token
        self.version: int | None = None  # the server's weight version after our last update or check
        self.dtype: str | None = None
        self.pushed_bytes = 0
        self.restarts = 0

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def capability(self) -> dict[str, Any] | None:
        """What `GET /admin/weights` says; None when the server has no such endpoint."""
        import httpx

        try:
            response = httpx.get(self.url, headers=self._headers(), timeout=CHECK_TIMEOUT_S)
        except httpx.HTTPError as e:
            raise ConfigError(
                f"cannot reach the sampling server at {self.url} ({type(e).__name__}: {e}): start it or fix "
                "policy.base_url"
            ) from e
        try:
            body = response.json() if response.status_code == 200 else None
        except ValueError:
            body = None
        return body if isinstance(body, dict) and "weight_updates" in body else None

    def connect(self) -> None:
        """Raise a `ConfigError` saying what to do unless the server takes updates with our token."""
        caps = self.capability()
        if caps is None:
            raise ConfigError(
                f"the server at {self.url} has no agentrl weight-update endpoint (an older agentrl serve, or another "
                "server): serve the model with `agentrl serve --weights-token TOKEN`"
            )
        if not caps["weight_updates"]:
            reason = caps.get("reason") or "weight updates are off"
            raise ConfigError(
                f"the server at {self.url} takes no weight updates ({reason}): restart it with "
                "`agentrl serve --weights-token TOKEN` and set policy.weight_sync_token=TOKEN"
            )
        if not self.token:
            raise ConfigError(
                "policy.weight_sync_token is not set (nor $AGENTRL_WEIGHTS_TOKEN): set it to the --weights-token "
                f"of the server at {self.url}"
            )
        if caps.get("authorized") is not True:
            raise ConfigError(
                f"the server at {self.url} rejects policy.weight_sync_token: set it to the server's --weights-token"
            )
        self.version, self.dtype = int(caps["version"]), caps.get("dtype")

    def push(self, tensors: dict[str, Any]) -> int:
        """Send `tensors` as one update; return the server's new version."""
        return self.send(self.encode(tensors))

    def encode(self, tensors: dict[str, Any]) -> bytes:
        """`tensors` cast to the server's dtype, as the bytes of one safetensors file."""
        import torch
        from safetensors.torch import save

        dtype = getattr(torch, self.dtype or "", None)
        cpu = {
            n: t.detach().to("cpu", dtype if isinstance(dtype, torch.dtype) else t.dtype) for n, t in tensors.items()
        }
        return save({n: t.contiguous() for n, t in cpu.items()})

    def send(self, data: bytes) -> int:
        """Send an encoded update; return the server's new version."""
        import httpx

        headers = {**self._headers(), "Content-Type": "application/octet-stream"}
        try:
            response = httpx.post(self.url, content=data, headers=headers, timeout=PUSH_TIMEOUT_S)
        except httpx.HTTPError as e:
            raise SamplerError(f"weight update to {self.url} failed: {type(e).__name__}: {e}") from e
        if response.status_code != 200:
            raise SamplerError(
                f"weight update to {self.url} refused: HTTP {response.status_code}: {_message(response)}"
            )
        version = int(response.json()["version"])
        if self.version is not None and version <= self.version:  # a new process: this update re-synced it
            self.restarts += 1
        elif self.version is not None and version != self.version + 1:
            raise SamplerError(
                f"the server at {self.url} went from weight version {self.version} to {version} on one update: another "
                "client updates it too; give each trainer a server of its own"
            )
        self.version = version
        self.pushed_bytes += len(data)
        return version

    def close(self) -> None:
        pass


def _message(response: Any) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]
