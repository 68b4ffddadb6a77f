"""Keeping a separate sampling server on the learner's weights (`policy.backend=openai`), or refusing to train.

`connect_weight_sync(config, source_model)` picks how the server gets weights (`policy.weight_sync`) and checks,
before training starts, that it can:

- `auto`: asks the server. `GET /admin/weights` answers → `agentrl` (`agentrl serve --weights-token`); otherwise vLLM's
  `/server_info` answers (its dev mode, which `trl vllm-serve` turns on) → `trl`; otherwise nothing can take weights;
- `agentrl`: `AgentrlWeightClient` (`weight_client.py`): the server must take updates and accept the token
  (`policy.weight_sync_token`, default $AGENTRL_WEIGHTS_TOKEN);
- `trl`: `TrlWeightClient` (`trl_weight_client.py`): TRL's `VLLMClient` over NCCL;
- `none`: no updates.

When the server cannot take weights (an old server, updates off, a wrong token, `none`), that is a `ConfigError` (a
`DependencyError` for a missing package) whose one line says what to do, unless `policy.off_policy=true`: then one
warning, and training goes on against the server's fixed weights.

`learner_weights(model)` is what travels: the parameters the learner changes, under the served model's names. A full
fine-tune sends every trainable parameter. A LoRA model (peft) sends, for each adapted module, its merged weight
W + (α/r)·BA, computed aside (merging into the learner's own weights and unmerging again would drift them by rounding
every step), plus any other trainable parameter (`modules_to_save`, biases) under its base name. So only the modules
LoRA adapts travel, as plain weights a server loads without knowing about adapters.
"""

from __future__ import annotations

import os
import re
import warnings
from typing import Any

from agentrl.errors import ConfigError, DependencyError

MODES = ("auto", "agentrl", "trl", "none")
OFF_POLICY_HINT = "or set policy.off_policy=true to train against the server's fixed weights (off-policy)"


def server_root(base_url: str) -> str:
    """`http://host:port/v1` → `http://host:port`: the weight endpoints are not under the OpenAI prefix."""
    return base_url.rstrip("/").removesuffix("/v1")


def weights_token(config: Any) -> str | None:
    return config.weight_sync_token or os.environ.get("AGENTRL_WEIGHTS_TOKEN") or None


def connect_weight_sync(config: Any, source_model: Any) -> Any | None:
    """The client that pushes `source_model`'s weights to `config.base_url`, checked; None when training goes on
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


def _connect(config: Any, source_model: Any) -> Any:
    from agentrl.policy.trl_weight_client import TrlWeightClient
    from agentrl.policy.weight_client import AgentrlWeightClient

    if config.weight_sync == "none":
        raise ConfigError("policy.weight_sync=none leaves the server's weights fixed: use policy.weight_sync=auto")
    if source_model is None:
        raise ConfigError("the openai policy was built without the learner's model, so it has no weights to send")
    root, token = server_root(config.base_url), weights_token(config)
    mode = detect(root, token) if config.weight_sync == "auto" else config.weight_sync
    if mode == "agentrl":
        client: Any = AgentrlWeightClient(root, token)
    else:
        client = TrlWeightClient(root, next(source_model.parameters()).device)
    client.connect()
    return client


def detect(root: str, token: str | None) -> str:
    """`agentrl` or `trl`: which weight-update protocol the server at `root` speaks."""
    import httpx

    from agentrl.policy.weight_client import AgentrlWeightClient

    if AgentrlWeightClient(root, token).capability() is not None:
        return "agentrl"
    try:
        vllm_dev_mode = httpx.get(f"{root}/server_info", timeout=10.0).status_code == 200
    except httpx.HTTPError:
        vllm_dev_mode = False
    if vllm_dev_mode:
        return "trl"
    raise ConfigError(
        f"the server at {root} takes no weight updates agentrl knows (neither `agentrl serve`'s /admin/weights nor "
        "the weight transfer of `trl vllm-serve`): serve the model with `agentrl serve --weights-token TOKEN` or "
        "`trl vllm-serve`"
    )


def learner_weights(model: Any) -> dict[str, Any]:
    """The learner's changing parameters under the served (base) model's names, detached."""
    import torch

    with torch.no_grad():
        if not (hasattr(model, "peft_config") and hasattr(model, "get_base_model")):
            return {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
        return _merged_lora_weights(model)


def _merged_lora_weights(model: Any) -> dict[str, Any]:
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    out: dict[str, Any] = {}
    layers = [(name, m) for name, m in base.named_modules() if isinstance(m, LoraLayer)]
    if not layers or any(m.use_dora.get(a) for _, m in layers for a in m.active_adapters):
        return _merged_copy_weights(model)  # another peft method, or DoRA: not W + BA
    for name, module in layers:
        weight = module.get_base_layer().weight.detach()
        if not module.merged:
            for adapter in module.active_adapters:
                if adapter in module.lora_A:
                    weight = weight + module.get_delta_weight(adapter)
        out[f"{name}.weight"] = weight
    for name, p in base.named_parameters():
        if p.requires_grad and ".lora_" not in name:
            out[_base_name(name)] = p.detach()
    return out


def _merged_copy_weights(model: Any) -> dict[str, Any]:
    import copy

    merged = copy.deepcopy(model).merge_and_unload()
    return {n: p.detach() for n, p in merged.named_parameters()}


def _base_name(peft_name: str) -> str:
    """`lm_head.modules_to_save.default.weight` → `lm_head.weight`; `q_proj.base_layer.bias` → `q_proj.bias`."""
    return re.sub(r"\.modules_to_save\.[^.]+", "", peft_name).replace(".base_layer", "")
