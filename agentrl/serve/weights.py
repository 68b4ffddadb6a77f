"""`WeightUpdater`: `agentrl serve` takes new weights from a trainer while it serves, between requests.

The endpoint (routes in `app.py`):

    GET  /admin/weights    capability: {"weight_updates": bool, "version": N, "dtype", "parameters", "sources",
                           "authorized": bool | null (whether the request's bearer token would be accepted),
                           "reason" (why updates are off, when they are)}; open, like /health
    POST /admin/weights    `Authorization: Bearer TOKEN`, and either
                             Content-Type: application/json         {"path": "<file or directory on this server>"}
                             Content-Type: application/octet-stream the bytes of one safetensors file
                           → {"version": N, "tensors": k, "waited_s", "applied_s"}

`version` counts the updates applied since the server started. A path names a `.safetensors` file or a directory of
them: a `save_pretrained` export (`model.safetensors` or its shards) or an agentrl checkpoint of a full fine-tune
(`checkpoints/step_N/`, whose `weights.safetensors` holds every trainable parameter). An update may carry any subset
of the served model's parameters, under their own names (`model.layers.0.self_attn.q_proj.weight`); LoRA adapter
tensors are refused (the trainer sends merged weights). Every name and shape is checked before anything is copied,
so a refused update changes nothing; tensors are cast to the served dtype.

Updates are off unless the server was given a token: 403 `weight_updates_disabled`. A request without a bearer token
gets 401, a wrong one 403 (compared in constant time). Before a single byte of the body is read.

An update never meets a request halfway: it takes the `SamplingGate` as its writer (new requests wait, requests in
flight finish on the old weights), and copies under a lock that every forward pass of the served model holds, so even
a row whose caller went away cannot be mid-step while its weights change.
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
from pathlib import Path
from typing import Any

from agentrl.serve.sampling import RequestError
from agentrl.serve.sampling_gate import SamplingGate

WEIGHTS_ROUTE = "/admin/weights"
OFF_WITHOUT_TOKEN = "the server was started without --weights-token (nor $AGENTRL_WEIGHTS_TOKEN)"
OFF_BY_FLAG = "the server was started with --no-weight-updates"


class WeightUpdater:
    """Applies pushed weights to a served `TransformersPolicy`'s model; counts the updates in `version`."""

    def __init__(self, policy: Any, gate: SamplingGate, *, token: str | None, off_reason: str | None = None):
        self.policy, self.gate = policy, gate
        self.model = policy.model
        self.token = token or None
        self.off_reason = off_reason or (None if self.token else OFF_WITHOUT_TOKEN)
        self.version = 0
        # remove_duplicate=False: a tied head (`lm_head.weight`) is addressable under its own name too
        self._targets = dict(self.model.named_parameters(remove_duplicate=False))
        self._forward_lock = threading.Lock()
        if self.enabled:
            self._hold_lock_in_forward()

    @property
    def enabled(self) -> bool:
        return self.off_reason is None

    # --- authentication and capability -----------------------------------------------------------------

    def _token_ok(self, authorization: str | None) -> bool | None:
        if not authorization or not authorization.startswith("Bearer "):
            return None
        given = authorization.removeprefix("Bearer ").strip().encode()
        return self.token is not None and hmac.compare_digest(given, self.token.encode())

    def capability(self, authorization: str | None) -> dict[str, Any]:
        first = next(iter(self._targets.values()))
        token_ok = self._token_ok(authorization)
        out: dict[str, Any] = {
            "object": "weights",
            "weight_updates": self.enabled,
            "version": self.version,
            "dtype": str(first.dtype).removeprefix("torch."),
            "parameters": len({id(p) for p in self._targets.values()}),
            "sources": ["path", "body"] if self.enabled else [],
            "format": "safetensors",
            "authorized": token_ok,
        }
        if not self.enabled:
            out["reason"] = self.off_reason
        return out

    def authorize(self, authorization: str | None) -> None:
        if not self.enabled:
            raise RequestError(f"weight updates are off: {self.off_reason}", status=403, code="weight_updates_disabled")
        ok = self._token_ok(authorization)
        if ok is None:
            raise RequestError("weight updates need `Authorization: Bearer TOKEN`", status=401, code="unauthorized")
        if not ok:
            raise RequestError("the weight-update token is wrong", status=403, code="forbidden")

    # --- reading an update -------------------------------------------------------------------------------

    def read_path(self, path: str) -> dict[str, Any]:
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        files = safetensors_files(Path(path))
        tensors: dict[str, Any] = {}
        try:
            for file in files:
                tensors.update(load_file(str(file), device="cpu"))
        except (SafetensorError, OSError) as e:
            raise RequestError(f"cannot read {path}: {e}", param="path") from e
        return tensors

    @staticmethod
    def read_bytes(data: bytes) -> dict[str, Any]:
        from safetensors import SafetensorError
        from safetensors.torch import load

        if not data:
            raise RequestError("the request body is empty; send the bytes of a safetensors file")
        try:
            return load(data)
        except (SafetensorError, ValueError) as e:
            raise RequestError(f"the request body is not a safetensors file: {e}") from e

    def check(self, tensors: dict[str, Any]) -> None:
        """Refuse the whole update (400) unless every tensor names a served parameter and has its shape."""
        if not tensors:
            raise RequestError("the update holds no tensors")
        adapters = [n for n in tensors if ".lora_A." in n or ".lora_B." in n or n.startswith("base_model.model.")]
        if adapters:
            raise RequestError(
                f"the update holds LoRA adapter tensors ({adapters[0]}, ...); this server takes plain weights: "
                "send the merged weights of the adapted modules (agentrl's trainer does)"
            )
        unknown = [n for n in tensors if n not in self._targets]
        if unknown:
            known = next(iter(self._targets))
            raise RequestError(
                f"{len(unknown)} tensors name no parameter of the served model ({', '.join(unknown[:3])}); "
                f"expected names like {known!r}"
            )
        wrong = [(n, tuple(t.shape), tuple(self._targets[n].shape)) for n, t in tensors.items()]
        wrong = [w for w in wrong if w[1] != w[2]]
        if wrong:
            name, got, want = wrong[0]
            raise RequestError(f"{name} has shape {got}, the served parameter {want} ({len(wrong)} mismatched)")

    # --- applying it between requests --------------------------------------------------------------------

    async def apply(self, tensors: dict[str, Any]) -> dict[str, Any]:
        """Wait for the requests in flight, copy the tensors in, bump the version. Runs to the end even if the
        caller goes away, so the gate is never left open while weights are half copied."""
        self.check(tensors)
        return await asyncio.shield(asyncio.ensure_future(self._apply(tensors)))

    async def _apply(self, tensors: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        async with self.gate.update():
            waited = time.monotonic() - started
            await asyncio.to_thread(self._copy, tensors)
            self.version += 1
            self.policy.version = self.version  # responses' `policy_version` / system_fingerprint follow it
        return {
            "object": "weights.update",
            "version": self.version,
            "tensors": len(tensors),
            "waited_s": round(waited, 4),
            "applied_s": round(time.monotonic() - started - waited, 4),
        }

    def _copy(self, tensors: dict[str, Any]) -> None:
        import torch

        with self._forward_lock, torch.no_grad():
            for name, tensor in tensors.items():
                target = self._targets[name]
                target.copy_(tensor.to(device=target.device, dtype=target.dtype))

    def _hold_lock_in_forward(self) -> None:
        """Every forward pass of the served model (a prefill or a decoding step, in the sampler's worker thread)
        holds the lock, so `_copy` waits for the step in flight and the next step waits for the copy."""
        lock = self._forward_lock
        self.model.register_forward_pre_hook(lambda _module, _args: lock.acquire() and None)
        self.model.register_forward_hook(lambda _module, _args, _out: lock.release(), always_call=True)


def safetensors_files(path: Path) -> list[Path]:
    """The safetensors file `path` names, or those of the directory it names (a `save_pretrained` export, or an
    agentrl checkpoint directory)."""
    if path.is_file():
        if path.suffix != ".safetensors":
            raise RequestError(f"{path} is not a .safetensors file", param="path")
        return [path]
    if not path.is_dir():
        raise RequestError(f"{path} does not exist on the server", param="path")
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise RequestError(f"{path} holds no .safetensors file", param="path")
    return files
