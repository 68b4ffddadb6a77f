"""Which weight sync `policy.backend=openai` uses, and refusing to train off-policy: against real `agentrl serve`
processes on 127.0.0.1; TRL's `VLLMClient` is replaced by a recorder where it would need vLLM and a GPU."""

from __future__ import annotations

import inspect

import httpx
import pytest
import torch

from agentrl.config import PolicyConfig
from agentrl.errors import ConfigError, DependencyError
from agentrl.policy import load_model_and_tokenizer
from agentrl.policy.openai_policy import OpenAICompletionsPolicy
from agentrl.policy.trl_weight_client import TrlWeightClient
from agentrl.policy.weight_sync import server_root
from agentrl.serve.app import build_service, create_app
from agentrl.serve.chat_completions import ChatService
from agentrl.testing import ScriptedPolicy, serve_in_thread

pytestmark = pytest.mark.integration

TOKEN = "weights-s3cret"


def learner(seed: int | None = None, scale: float = 0.01):
    """A trainable copy of the tiny policy, its weights moved by noise of `scale` when `seed` is given."""
    model, _ = load_model_and_tokenizer(PolicyConfig(model="tiny", device="cpu"))
    if seed is not None:
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=generator) * scale)
    return model


def config(url: str, **fields) -> PolicyConfig:
    return PolicyConfig(model="tiny", backend="openai", base_url=url + "/v1", **fields)


# --- refusing to train off-policy ----------------------------------------------------------------------


def refusal(cfg: PolicyConfig, tokenizer) -> str:
    with pytest.raises((ConfigError, DependencyError)) as raised:
        OpenAICompletionsPolicy.from_config(cfg, tokenizer, source_model=learner())
    message = str(raised.value)
    assert "\n" not in message and "policy.off_policy=true" in message
    return message


def test_a_server_that_cannot_take_weights_is_refused_before_training(tiny_tokenizer):
    off = build_service("tiny", device="cpu")
    with serve_in_thread(create_app(off)) as url:
        assert "--weights-token" in refusal(config(url, weight_sync_token=TOKEN), tiny_tokenizer)
        assert "policy.weight_sync=none" in refusal(config(url, weight_sync="none"), tiny_tokenizer)
    with serve_in_thread(create_app(build_service("tiny", device="cpu", weights_token=TOKEN))) as url:
        assert "rejects policy.weight_sync_token" in refusal(config(url, weight_sync_token="nope"), tiny_tokenizer)
        assert "weight_sync_token is not set" in refusal(config(url), tiny_tokenizer)
    old = ChatService(ScriptedPolicy(tiny_tokenizer, ["hi"]), ("tiny",))  # no weight endpoint, as an older server
    with serve_in_thread(create_app(old)) as url:
        assert "takes no weight updates agentrl knows" in refusal(config(url, weight_sync_token=TOKEN), tiny_tokenizer)
        assert "no agentrl weight-update endpoint" in refusal(
            config(url, weight_sync="agentrl", weight_sync_token=TOKEN), tiny_tokenizer
        )
    with pytest.raises(ConfigError, match="choose one of"):
        OpenAICompletionsPolicy.from_config(config("http://127.0.0.1:9", weight_sync="rsync"), tiny_tokenizer)


def test_off_policy_warns_once_and_goes_on_without_pushing(tiny_tokenizer):
    off = build_service("tiny", device="cpu")
    with serve_in_thread(create_app(off)) as url:
        with pytest.warns(RuntimeWarning, match="training off-policy") as caught:
            policy = OpenAICompletionsPolicy.from_config(
                config(url, off_policy=True), tiny_tokenizer, source_model=learner(seed=8)
            )
        assert len(caught) == 1 and policy.weight_sync is None
        policy.sync_weights()
        assert policy.version == 1 and httpx.get(url + "/admin/weights").json()["version"] == 0


# --- TRL's `trl vllm-serve` ------------------------------------------------------------------------------


def fake_vllm_dev_server():
    """A double for a vLLM server in dev mode, as `trl vllm-serve` starts it: no /admin/weights, a /server_info."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/server_info")
    async def server_info() -> dict:
        return {"vllm_config": {"weight_transfer_config": {"backend": "nccl"}}}

    return app


def test_auto_picks_trl_for_a_vllm_dev_server_and_needs_vllm_and_a_gpu_for_it(tiny_tokenizer):
    with serve_in_thread(fake_vllm_dev_server()) as url:
        message = refusal(config(url, weight_sync_token=TOKEN), tiny_tokenizer)
        assert "policy.weight_sync=trl" in message  # vLLM missing here, or the learner on the CPU
        with pytest.warns(RuntimeWarning, match="weight_sync=trl"):
            OpenAICompletionsPolicy.from_config(config(url, off_policy=True), tiny_tokenizer, source_model=learner())


class RecordingVLLMClient:
    """Stands in for TRL's `VLLMClient` (which needs vLLM and a GPU): records how it is driven."""

    calls: list = []

    def __init__(self, base_url=None, host="0.0.0.0", server_port=8000, group_port=51216, connection_timeout=0.0):
        self.calls.append(("__init__", {"base_url": base_url, "connection_timeout": connection_timeout}))

    def init_communicator(self, device=0):
        self.calls.append(("init_communicator", {"device": device}))

    def update_named_params(self, metadata, named_params):
        self.calls.append(("update_named_params", {"metadata": metadata, "names": [n for n, _ in named_params]}))

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache", {}))

    def close_communicator(self):
        self.calls.append(("close_communicator", {}))


def test_the_trl_client_is_driven_as_trl_documents_it():
    from trl.generation.vllm_client import VLLMClient

    for method in ("__init__", "init_communicator", "update_named_params", "reset_prefix_cache", "close_communicator"):
        real = inspect.signature(getattr(VLLMClient, method)).parameters
        assert list(inspect.signature(getattr(RecordingVLLMClient, method)).parameters) == list(real)
    RecordingVLLMClient.calls = []
    client = TrlWeightClient(server_root("http://10.0.0.2:8000/v1/"), "cuda:0", client_class=RecordingVLLMClient)
    client.connect()
    weights = {"model.norm.weight": torch.ones(4, dtype=torch.bfloat16), "lm_head.weight": torch.zeros(3, 4)}
    assert client.push(weights) == 1
    client.close()
    assert RecordingVLLMClient.calls == [
        ("__init__", {"base_url": "http://10.0.0.2:8000", "connection_timeout": 30.0}),
        ("init_communicator", {"device": "cuda:0"}),
        (
            "update_named_params",
            {
                "metadata": [("model.norm.weight", "bfloat16", [4]), ("lm_head.weight", "float32", [3, 4])],
                "names": ["model.norm.weight", "lm_head.weight"],
            },
        ),
        ("reset_prefix_cache", {}),
        ("close_communicator", {}),
    ]
    with pytest.raises(ConfigError, match="CUDA device"):
        TrlWeightClient("http://10.0.0.2:8000", torch.device("cpu"), client_class=RecordingVLLMClient).connect()
