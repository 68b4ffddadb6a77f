"""`policy.backend=openai` against `vllm serve` in its own process: the served model's name found, sampling
parameters sent explicitly (the model's generation config asks for top-k, min-p and a repetition penalty here,
which the learner does not apply), log-probabilities of the sampled distribution, and the learner's weights loaded
into the server after every step through vLLM's dev-mode reload."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from types import SimpleNamespace

import httpx
import pytest
import torch

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="the vllm tier runs in the vLLM environment (scripts/setup_vllm.sh)")

from test_vllm_engine import chat_prompt, gap, perturb, run_all  # noqa: E402

from agentrl.policy import resolve_model_path  # noqa: E402
from agentrl.policy.config import PolicyConfig  # noqa: E402
from agentrl.policy.openai_policy import OpenAICompletionsPolicy  # noqa: E402
from agentrl.protocols import SamplingParams  # noqa: E402

SERVED_NAME = "tiny-served"
START_TIMEOUT_S = 600.0  # a loaded 2-core machine starts vLLM slowly
TOLERANCE = 1e-4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, server: subprocess.Popen, log) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            log.seek(0)
            pytest.fail(f"vllm serve exited: {log.read()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    pytest.fail(f"vllm serve did not answer /health within {START_TIMEOUT_S:g} s")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = tmp_path_factory.mktemp("model")
    for item in os.listdir(resolve_model_path("tiny")):
        shutil.copy(os.path.join(resolve_model_path("tiny"), item), model)
    generation = json.loads((model / "generation_config.json").read_text())
    # what Qwen-style generation configs suggest: a server fills these in for any request that leaves them out
    generation |= {"top_k": 3, "min_p": 0.2, "repetition_penalty": 1.8}
    (model / "generation_config.json").write_text(json.dumps(generation))
    port = free_port()
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
    argv += ["--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    argv += ["--max-model-len", "512", "--enforce-eager", "--logprobs-mode", "processed_logprobs"]
    log = (tmp_path_factory.mktemp("log") / "serve.log").open("w+")
    # a session of its own: the engine and worker processes it spawns end with it
    process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    root = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(root, process, log)
        yield SimpleNamespace(root=root, model=str(model))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def trained(server, tiny_tokenizer):
    """The openai policy as `agentrl train` builds it, over a float32 learner of the same checkpoint."""
    from transformers import AutoModelForCausalLM

    learner = AutoModelForCausalLM.from_pretrained(server.model, dtype=torch.float32).eval()
    config = PolicyConfig(model=server.model, backend="openai", base_url=f"{server.root}/v1")
    policy = OpenAICompletionsPolicy.from_config(config, tiny_tokenizer, source_model=learner)
    loop = asyncio.new_event_loop()
    prompt = chat_prompt(tiny_tokenizer)
    yield SimpleNamespace(policy=policy, learner=learner, loop=loop, prompt=prompt)
    loop.run_until_complete(policy.aclose())
    loop.close()


def sample(trained, n: int = 6, temperature: float = 1.0) -> list:
    params = SamplingParams(max_new_tokens=24, temperature=temperature, seed=7)
    return run_all(trained.loop, [trained.policy.generate(trained.prompt, params) for _ in range(n)])


def test_the_policy_finds_the_served_name_and_the_reload_route(trained):
    assert trained.policy.model == SERVED_NAME  # policy.model is a local path the server does not know
    assert trained.policy.weight_sync.name == "vllm"  # auto: a dev-mode vLLM server, a learner on the CPU
    assert trained.policy.send_seeds is False  # the server says it runs the CPU build


def test_served_logprobs_are_the_learners_with_sampling_parameters_sent_explicitly(trained):
    completions = sample(trained)
    assert trained.policy.retokenized_completions == 0
    assert len({c.token_ids for c in completions}) > 1
    assert gap(trained.learner, trained.prompt, completions) < TOLERANCE
    tempered = sample(trained, temperature=0.6)  # --logprobs-mode processed_logprobs: after temperature
    assert gap(trained.learner, trained.prompt, tempered, temperature=0.6) < TOLERANCE


def test_every_step_loads_the_learners_weights_into_the_server(trained):
    for step in (1, 2):
        perturb(trained.learner, seed=10 + step)
        trained.policy.sync_weights()
        assert trained.policy.version == step and trained.policy.weight_sync.version == step + 1  # + the first push
        assert gap(trained.learner, trained.prompt, sample(trained)) < TOLERANCE
