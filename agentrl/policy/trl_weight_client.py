"""`TrlWeightClient`: pushes the learner's weights to a vLLM server started with `trl vllm-serve`, with TRL's client.

`trl vllm-serve` (TRL 1.16) runs vLLM's own OpenAI-compatible server (`vllm serve` with
`--weight-transfer-config '{"backend": "nccl"}'`, `--logprobs-mode processed_logprobs` and `VLLM_SERVER_DEV_MODE=1`).
So sampling goes through `/v1/completions` with token-id prompts and `return_tokens_as_token_ids`, like any
`policy.backend=openai` server, and its logprobs are those of the sampling distribution (after temperature), as
the learner's are. Weights go through TRL's `VLLMClient`, exactly as TRL's GRPO trainer drives it: `VLLMClient(
base_url=<server root>, connection_timeout=...)`, `init_communicator(device=<learner's device>)` once, then per update
`update_named_params(metadata, iterator)` (`(name, dtype, shape)` triplets announced before the tensors are
broadcast) and `reset_prefix_cache()`. The broadcast is NCCL: the trainer needs vLLM installed and a CUDA device.

The trainer is rank 0 of the NCCL group and hosts its rendezvous at `group_port` (TRL's default, 51216), which the
server must reach. Several servers (`policy.base_url` naming a pool) each form a group of their own with the trainer,
so each gets a port of its own: 51216, 51217, … in `base_url` order.

Versions: TRL 1.16 supports vLLM 0.22–0.31 and speaks the protocol of the vLLM installed beside the trainer, so
`connect` refuses, in one line, a trainer and server on different vLLM releases or outside that range
(`vllm_environment.check_trl_server`).
"""

from __future__ import annotations

from typing import Any

from agentrl.errors import ConfigError, DependencyError, SamplerError

CONNECTION_TIMEOUT_S = 30.0
GROUP_PORT = 51216
"""The trainer's rendezvous port for the first server's NCCL group (TRL's default); the next server's is one up."""


def vllm_client_class() -> Any:
    """TRL's `VLLMClient` (in `trl.generation` since TRL 1.x, `trl.extras` before)."""
    try:
        from trl.generation.vllm_client import VLLMClient
    except ImportError:
        try:
            from trl.extras.vllm_client import VLLMClient  # type: ignore[no-redef]
        except ImportError as e:
            raise DependencyError(
                f"policy.weight_sync=trl needs TRL's vLLM client ({e}): pip install 'trl[vllm]'"
            ) from e
    return VLLMClient


def server_vllm_version(root_url: str) -> str | None:
    """The vLLM release a server runs (`GET /version`), or None when it does not say."""
    import httpx

    try:
        response = httpx.get(f"{root_url.rstrip('/')}/version", timeout=CONNECTION_TIMEOUT_S)
        return str(response.json()["version"]) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None


class TrlWeightClient:
    """One `trl vllm-serve` server and the NCCL group that carries the learner's weights to it."""

    name = "trl"

    def __init__(self, root_url: str, device: Any, *, group_port: int = GROUP_PORT, client_class: Any = None):
        self.root_url, self.device, self.group_port = root_url.rstrip("/"), device, group_port
        self._client_class = client_class
        self.client: Any = None
        self.version = 0  # updates pushed (vLLM keeps no count of its own)

    def connect(self) -> None:
        """Reach the server and join its weight-transfer group; a `ConfigError` or `DependencyError` says what is
        missing."""
        import importlib.util

        import torch

        cls = self._client_class or vllm_client_class()
        if self._client_class is None and importlib.util.find_spec("vllm") is None:
            raise DependencyError(
                "policy.weight_sync=trl needs vLLM on the trainer's machine (TRL's client joins the server's NCCL "
                "group): pip install 'agentrl[vllm]'"
            )
        if self._client_class is None:
            from agentrl.policy.vllm_environment import check_trl_server, installed_vllm_version

            check_trl_server(server_vllm_version(self.root_url), installed_vllm_version())
        if torch.device(self.device).type != "cuda":
            raise ConfigError(
                f"policy.weight_sync=trl broadcasts weights over NCCL from a CUDA device; the learner is on "
                f"{self.device}: train on a GPU (policy.device=cuda)"
            )
        try:
            self.client = cls(
                base_url=self.root_url, group_port=self.group_port, connection_timeout=CONNECTION_TIMEOUT_S
            )
        except ImportError as e:  # VLLMClient needs vLLM in the trainer's environment for the NCCL group
            raise DependencyError(
                f"policy.weight_sync=trl needs vLLM on the trainer's machine ({e}): pip install 'agentrl[vllm]'"
            ) from e
        except Exception as e:  # requests' ConnectionError after its retries, or an unexpected answer
            raise ConfigError(
                f"cannot reach the vLLM server at {self.root_url} ({type(e).__name__}: {e}): start it with "
                "`trl vllm-serve --model MODEL` or fix policy.base_url"
            ) from e
        try:
            self.client.init_communicator(device=self.device)
        except Exception as e:  # no weight-transfer engine, no dev mode, NCCL rendezvous failed
            raise ConfigError(
                f"the vLLM server at {self.root_url} cannot take weights ({type(e).__name__}: {e}): start it with "
                "`trl vllm-serve`, which enables NCCL weight transfer"
            ) from e

    def push(self, tensors: dict[str, Any]) -> int:
        metadata = [(name, str(t.dtype).removeprefix("torch."), list(t.shape)) for name, t in tensors.items()]
        try:
            self.client.update_named_params(metadata, iter(tensors.items()))
            self.client.reset_prefix_cache()  # cached keys and values belong to the old weights
        except Exception as e:
            raise SamplerError(f"weight update to {self.root_url} failed: {type(e).__name__}: {e}") from e
        self.version += 1
        return self.version

    def close(self) -> None:
        if self.client is not None:
            self.client.close_communicator()
