"""Keeping a separate sampling server on the learner's weights (`policy.backend=openai`), or refusing to train.

`connect_weight_sync(config, source_model)` picks how the server gets weights (`policy.weight_sync`) and checks,
before training starts, that it can:

- `auto`: asks the server. `GET /admin/weights` answers → `agentrl` (`agentrl serve --weights-token`); otherwise vLLM's
  `/server_info` answers (its dev mode, which `trl vllm-serve` turns on) → `trl` when the server has NCCL weight
  transfer configured and the learner is on a CUDA device, else `vllm`; otherwise nothing can take weights;
- `agentrl`: `AgentrlWeightClient` (`weight_client.py`): the server must take updates and accept the token
  (`policy.weight_sync_token`, default $AGENTRL_WEIGHTS_TOKEN);
- `vllm`: `VLLMReloadClient` (`vllm_reload_client.py`): `vllm serve` in dev mode on this machine reloads the weights
  from files the trainer writes, through vLLM's own `reload_weights` (no CUDA needed);
- `trl`: `TrlWeightClient` (`trl_weight_client.py`): TRL's `VLLMClient` over NCCL;
- `none`: no updates.

When the server cannot take weights (an old server, updates off, a wrong token, `none`), that is a `ConfigError` (a
`DependencyError` for a missing package) whose one line says what to do, unless `policy.off_policy=true`: then one
warning, and training goes on against the server's fixed weights.

Several servers (`policy.base_url` naming a pool, `server_pool.py`): each is checked as above, in turn, and one that
cannot take weights refuses the run (or, with `policy.off_policy=true`, leaves the whole pool on its fixed weights:
a pool half updated would sample from two policies). A `WeightSyncGroup` sends each update to every server at once
and fails the step with a `SamplerError` (an `InfraError`) naming any server that did not take it: the next collect
would otherwise sample from a server on older weights, off-policy, with nothing to show it.

What travels is `learner_weights(model)` (`learner_weights.py`): the parameters the learner changes, under the served
model's names, a LoRA model's adapted modules merged.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentrl.errors import ConfigError, DependencyError, SamplerError

MODES = ("auto", "agentrl", "vllm", "trl", "none")
OFF_POLICY_HINT = "or set policy.off_policy=true to train against the server's fixed weights (off-policy)"


def server_root(base_url: str) -> str:
    """`http://host:port/v1` → `http://host:port`: the weight endpoints are not under the OpenAI prefix."""
    return base_url.rstrip("/").removesuffix("/v1")


def weights_token(config: Any) -> str | None:
    return config.weight_sync_token or os.environ.get("AGENTRL_WEIGHTS_TOKEN") or None


def connect_weight_sync(config: Any, source_model: Any) -> WeightSyncGroup | None:
    """What pushes `source_model`'s weights to every server of `config.base_url`, checked; None when training goes on
    off-policy (`policy.off_policy=true`, warned once)."""
    if config.weight_sync not in MODES:
        raise ConfigError(f"policy.weight_sync={config.weight_sync!r}: choose one of {', '.join(MODES)}")
    try:
        return _connect(config, source_model)
    except (ConfigError, DependencyError) as e:
        if not config.off_policy:
            raise type(e)(f"{e}, {OFF_POLICY_HINT}") from e
        warnings.warn(
            f"training off-policy (policy.off_policy=true): {e}. The server keeps sampling from its own weights; "
            "train/sampler_logprob_abs_diff shows how far the learner moves away from them",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _connect(config: Any, source_model: Any) -> WeightSyncGroup:
    if config.weight_sync == "none":
        raise ConfigError("policy.weight_sync=none leaves the server's weights fixed: use policy.weight_sync=auto")
    if source_model is None:
        raise ConfigError("the openai policy was built without the learner's model, so it has no weights to send")
    from agentrl.policy.server_pool import server_urls

    token, device = weights_token(config), next(source_model.parameters()).device
    urls = server_urls(config.base_url)
    clients = [_client(config.weight_sync, server_root(url), token, device, i) for i, url in enumerate(urls)]
    for client in clients:
        client.connect()
    return WeightSyncGroup(clients)


def _client(mode: str, root: str, token: str | None, device: Any, index: int = 0) -> Any:
    """The weight client of the `index`-th server of the pool, at `root`."""
    from agentrl.policy.trl_weight_client import GROUP_PORT, TrlWeightClient
    from agentrl.policy.weight_client import AgentrlWeightClient

    mode = detect(root, token, device) if mode == "auto" else mode
    if mode == "agentrl":
        return AgentrlWeightClient(root, token)
    if mode == "vllm":
        from agentrl.policy.vllm_reload_client import VLLMReloadClient

        return VLLMReloadClient(root)
    return TrlWeightClient(root, device, group_port=GROUP_PORT + index)  # one NCCL group, so one port, per server


class WeightSyncGroup:
    """The weight clients of every server of the pool (one, for a single server), pushed together."""

    def __init__(self, clients: list[Any]):
        self.clients = clients
        self.name = "+".join(dict.fromkeys(c.name for c in clients))

    @property
    def version(self) -> int | None:
        """The weight version every server holds, when they agree (None when they do not)."""
        versions = {c.version for c in self.clients}
        return versions.pop() if len(versions) == 1 else None

    @property
    def whole_model(self) -> bool:
        """Whether some server needs every weight on each update (vLLM's reload), not only the trainable ones."""
        return any(getattr(c, "whole_model", False) for c in self.clients)

    @property
    def server_versions(self) -> list[int | None]:
        """Per server, the version it reports itself (`agentrl serve`); None where only this side counts (TRL)."""
        return [c.version if c.name == "agentrl" else None for c in self.clients]

    def push(self, tensors: dict[str, Any]) -> None:
        """Send one update to every server at once: the HTTP ones each in a thread of their own, with bytes encoded
        once per dtype; the NCCL ones (TRL) one after another, in one more thread, since collectives started from
        several threads on one device can deadlock. Raises `SamplerError` naming every server that failed."""
        http = [c for c in self.clients if hasattr(c, "send")]
        nccl = [c for c in self.clients if not hasattr(c, "send")]
        encoded: dict[Any, bytes] = {}
        for client in http:
            if client.dtype not in encoded:
                encoded[client.dtype] = client.encode(tensors)

        def push_each(batch: list[Any]) -> list[tuple[Any, BaseException | None]]:
            results: list[tuple[Any, BaseException | None]] = []
            for client in batch:
                try:
                    client.send(encoded[client.dtype]) if client in http else client.push(tensors)
                    results.append((client, None))
                except Exception as e:  # each server's failure is reported, whatever it was
                    results.append((client, e))
            return results

        batches = [[c] for c in http] + ([nccl] if nccl else [])
        with ThreadPoolExecutor(len(batches), thread_name_prefix="agentrl-weights") as pool:
            results = [r for batch in pool.map(push_each, batches) for r in batch]
        failed = [(c, e) for c, e in results if e is not None]
        if failed:
            names = ", ".join(c.root_url for c, _ in failed)
            raise SamplerError(
                f"weight update failed on {len(failed)} of {len(self.clients)} servers ({names}): {failed[0][1]}; the "
                "next collect would sample from older weights there, so the run stops: restart that server and resume "
                "with `agentrl train --resume RUN_DIR`, or drop it from policy.base_url"
            ) from failed[0][1]

    def close(self) -> None:
        for client in self.clients:
            client.close()


def detect(root: str, token: str | None, device: Any = "cpu") -> str:
    """`agentrl`, `trl` or `vllm`: which weight-update protocol the server at `root` speaks, for a learner on
    `device`."""
    import torch

    from agentrl.policy.vllm_reload_client import server_info
    from agentrl.policy.weight_client import AgentrlWeightClient

    if AgentrlWeightClient(root, token).capability() is not None:
        return "agentrl"
    info = server_info(root)
    if info is not None:
        transfer = info.get("weight_transfer_config") or {}
        nccl = isinstance(transfer, dict) and transfer.get("backend") == "nccl"
        return "trl" if nccl and torch.device(device).type == "cuda" else "vllm"
    raise ConfigError(
        f"the server at {root} takes no weight updates agentrl knows (neither `agentrl serve`'s /admin/weights nor "
        "vLLM's dev-mode /server_info): serve the model with `agentrl serve --weights-token TOKEN`, with "
        "`VLLM_SERVER_DEV_MODE=1 vllm serve` on this machine, or with `trl vllm-serve`"
    )
