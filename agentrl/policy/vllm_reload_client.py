"""`VLLMReloadClient`: keeps a `vllm serve` on this machine on the learner's weights with vLLM's in-place reload.

`vllm serve` in dev mode (`VLLM_SERVER_DEV_MODE=1`) answers `GET /server_info` (its whole config) and `POST
/collective_rpc`, which calls a method of every worker by name with string arguments. vLLM's workers have
`reload_weights(weights_path=DIR)`: reload the model in place from the checkpoint files in DIR, through the same
loading and post-load processing as at start (so it fits the CPU build, which repacks its weights, and any
tensor-parallel size). An update is then:

1. the learner writes every weight (a LoRA learner's merged, `learner_weights.merged_named_weights`) cast to the
   server's dtype, as safetensors files in a fresh directory (`/dev/shm` when it has room);
2. `POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": DIR}}`;
3. `POST /reset_prefix_cache` (cached keys and values belong to the old weights); the directory is removed.

No agentrl code runs in the server and nothing needs CUDA or NCCL; the server must read the trainer's files, so it
runs on the same machine (or sees the same filesystem at the same path). Every weight travels, never a subset: vLLM
reloads whole layers, and a fused layer (q, k and v in one) given only some of its tensors would be left half
uninitialised.

`connect()` checks, before training starts, that the server is in dev mode, serves unquantized weights and returns
the sampling distribution's log-probabilities (`--logprobs-mode processed_logprobs`: after temperature and top-p,
as the learner scores them; vLLM's default is the raw distribution's).
"""

from __future__ import annotations

from typing import Any

from agentrl.errors import ConfigError, SamplerError

CHECK_TIMEOUT_S = 10.0
INFO_TIMEOUT_S = 60.0
"""vLLM's first /server_info collects its system environment (seconds, more on a busy machine)."""
RELOAD_TIMEOUT_S = 600.0
DEV_MODE_HINT = "start it with VLLM_SERVER_DEV_MODE=1 (its /collective_rpc reloads weights)"


def server_info(root_url: str) -> dict[str, Any] | None:
    """A vLLM server's config (`GET /server_info?config_format=json`, dev mode only); None when it does not answer
    one (not vLLM, or vLLM outside dev mode)."""
    import httpx

    try:
        response = httpx.get(f"{root_url}/server_info", params={"config_format": "json"}, timeout=INFO_TIMEOUT_S)
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    config = body.get("vllm_config") if isinstance(body, dict) else None
    return config if isinstance(config, dict) else None


def serves_on_cpu(info: dict[str, Any] | None) -> bool:
    """Whether a vLLM server's config (`server_info`) says it runs its CPU build."""
    device = (info or {}).get("device_config") or {}
    return isinstance(device, dict) and str(device.get("device", "")).startswith("cpu")


def check_sampling_server(root_url: str, info: dict[str, Any]) -> None:
    """Raise `ConfigError` when a vLLM server's log-probabilities are not the sampling distribution's."""
    mode = (info.get("model_config") or {}).get("logprobs_mode")
    if mode is not None and mode != "processed_logprobs":
        raise ConfigError(
            f"the vLLM server at {root_url} returns {mode}, not the log-probabilities of the distribution it samples "
            "from (after temperature and top-p), which the learner compares with its own: restart it with "
            "--logprobs-mode processed_logprobs"
        )


def _routes(root_url: str) -> set[str]:
    """The paths a FastAPI server documents (`GET /openapi.json`); empty when it documents none."""
    import httpx

    try:
        response = httpx.get(f"{root_url}/openapi.json", timeout=CHECK_TIMEOUT_S)
        return set(response.json().get("paths", {})) if response.status_code == 200 else set()
    except (httpx.HTTPError, ValueError, AttributeError):
        return set()


class VLLMReloadClient:
    """One `vllm serve` in dev mode, updated through vLLM's `reload_weights` from files on this machine."""

    name = "vllm"
    whole_model = True
    """Every weight travels on each update (see the module docstring)."""

    def __init__(self, root_url: str):
        self.root_url = root_url.rstrip("/")
        self.version = 0  # updates pushed (vLLM counts none of its own)
        self.dtype: Any = None

    def connect(self) -> None:
        """Raise `ConfigError` saying what to do unless the server can take weights this way."""
        import torch

        info = server_info(self.root_url)
        if info is None:
            raise ConfigError(f"the server at {self.root_url} answers no vLLM /server_info: {DEV_MODE_HINT}")
        model = info.get("model_config") or {}
        if model.get("quantization"):
            raise ConfigError(
                f"the vLLM server at {self.root_url} serves {model['quantization']}-quantized weights, which the "
                "learner's full-precision updates cannot replace: serve the unquantized checkpoint"
            )
        check_sampling_server(self.root_url, info)
        if "/collective_rpc" not in _routes(self.root_url):
            transfer = info.get("weight_transfer_config") or {}
            nccl = isinstance(transfer, dict) and transfer.get("backend") == "nccl"
            hint = (
                " (its NCCL weight transfer: policy.weight_sync=trl, with vLLM and the learner on a GPU)"
                if nccl
                else ""
            )
            raise ConfigError(f"the vLLM server at {self.root_url} has no /collective_rpc{hint}: {DEV_MODE_HINT}")
        self.dtype = getattr(torch, str(model.get("dtype", "")).removeprefix("torch."), None)

    def push(self, tensors: dict[str, Any]) -> int:
        """Write `tensors` (every weight of the model) to files and have the server reload them."""
        import httpx

        from agentrl.policy.vllm_policy import BUCKET_BYTES, _buckets
        from agentrl.policy.vllm_worker import WeightFiles

        with WeightFiles(BUCKET_BYTES) as files:
            for bucket in _buckets(tensors.items()):
                files.write(bucket, self.dtype)
            body = {"method": "reload_weights", "kwargs": {"weights_path": files.directory}}
            try:
                response = httpx.post(f"{self.root_url}/collective_rpc", json=body, timeout=RELOAD_TIMEOUT_S)
                if response.status_code == 200:
                    response = httpx.post(f"{self.root_url}/reset_prefix_cache", timeout=CHECK_TIMEOUT_S)
            except httpx.HTTPError as e:
                raise SamplerError(f"weight update to {self.root_url} failed: {type(e).__name__}: {e}") from e
        if response.status_code != 200:
            raise SamplerError(
                f"weight update to {self.root_url} refused: HTTP {response.status_code}: {response.text[:300]}"
            )
        self.version += 1
        return self.version

    def close(self) -> None:
        pass
