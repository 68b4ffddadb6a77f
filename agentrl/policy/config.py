"""`PolicyConfig`: the model being trained or evaluated, and the sampler backend over it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class VLLMConfig:
    """The in-process vLLM engine of `policy.backend=vllm` (vLLM's `LLM(...)` arguments of the same names)."""

    gpu_memory_utilization: float | None = None
    """Share of the GPU's memory the engine may take (weights, KV cache); None = computed when the engine starts:
    what is free beside the learner, less what the learner's update will still allocate (its optimizer state, and
    unless the engine sleeps through updates its gradients and activations). A share that does not fit fails with
    one line before the engine starts."""
    tensor_parallel_size: int = 1
    """GPUs one engine spans."""
    max_model_len: int | None = None
    """Longest sequence the engine serves; None = the model's own limit (set it to bound the KV cache)."""
    dtype: str = "auto"
    """Dtype the engine computes in: `auto` = the learner's compute dtype (bfloat16 under `trainer.precision`
    bf16-mixed or bf16, float32 under fp32), so the sampler's log-probabilities describe what the learner scores;
    or `float32`, `bfloat16`, `float16`. (vLLM's own default runs float32 checkpoints in 16 bits.)"""
    enforce_eager: bool = False
    """Run without CUDA graphs (slower decoding, faster start, less memory)."""
    sleep_between_steps: bool = False
    """Colocated engine: release its GPU memory (sleep mode, level 1) while the learner updates and wake it
    before the next collect. Needs vLLM's sleep mode (`enable_sleep_mode`)."""


@dataclass(frozen=True)
class PolicyConfig:
    """The model being trained (or evaluated) and how it samples."""

    model: str = "tiny"
    """Model to train: `tiny` (the shipped tiny policy: code, search), `tiny-extended` (its stage trained on the
    easy tiers of terminal, GUI and SWE too), `tiny-swe` (that stage trained further on SWE drills), a local
    checkpoint path, or a hub id (downloaded unless `local_files_only`)."""
    local_files_only: bool | None = None
    """Load `model` only from a local path or the local hub cache, never downloading (a model not cached fails at
    once, saying how to download it); None = true when $HF_HUB_OFFLINE is set, else false."""
    backend: str = "auto"
    """Sampler backend: `auto` (vLLM on a CUDA device when it is installed, else transformers; the run header says
    which and why), `transformers` (in-process), `vllm` (an in-process vLLM engine, weights synced from the learner
    each step; the `vllm` extra) or `openai` (an OpenAI-compatible completions server)."""
    base_url: str | tuple[str, ...] | None = None
    """Base URL of the OpenAI-compatible server for the `openai` backend, or of several serving the same model
    (comma-separated, `http://a:8000/v1,http://b:8000/v1`, or a TOML list): a trajectory's requests stay on one
    server, new trajectories go to the least-loaded, and every server gets each weight update."""
    served_model_name: str | None = None
    """The name the `openai` backend's server serves the model under (the `model` of each request); None = asked
    of the server (`GET /v1/models`): its only model, or `model` when it serves several."""
    api_key: str | None = None
    """API key for the `openai` backend (defaults to $OPENAI_API_KEY, then `EMPTY`)."""
    device: str = "auto"
    """Torch device for the in-process model: `auto`, `cpu`, `cuda`, `cuda:1`, ..."""
    dtype: str = "auto"
    """Dtype the weights are loaded in: `auto` (float32, the values the learner's fp32 master weights start from;
    `trainer.precision` then decides what the parameters compute in), `float32`, `bfloat16`, `float16`. Weights
    trained in bf16 without masters (`trainer.precision=bf16`) lose any update smaller than their resolution (about
    0.4% of a weight), which RL learning rates fall below."""
    max_batch_size: int = 128
    """Most generation requests the in-process sampler batches into one forward pass."""
    batch_wait_ms: float = 2.0
    """How long the sampler waits for more requests before starting a batch."""
    prefix_cache_tokens: int = 32768
    """Positions of finished rows' keys and values the in-process sampler keeps, so that a trajectory's next turn
    (and a prompt sharing a prefix with one already seen) prefills only its new tokens; least recently used go
    first, and all go when the weights change. Memory per position: 2 x layers x KV heads x head_dim x the
    activations' bytes (about 112 KB for Qwen3-0.6B in bf16). 0 turns the reuse off."""
    lora_rank: int = 0
    """LoRA rank (peft); 0 trains all parameters."""
    lora_alpha: int = 32
    """LoRA alpha."""
    lora_target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """Modules LoRA adapts."""
    gradient_checkpointing: bool | None = None
    """Recompute activations in the backward pass to save memory: true in every decoder layer, false in none; None =
    decided by memory: off when the update (model, gradients, masters, optimizer state and the activations of
    `trainer.max_tokens_per_microbatch` tokens) fits in 90% of the device's memory, otherwise in just enough decoder
    layers to fit."""
    activation_checkpointing_above_params: int = 200_000_000
    """No longer used (activation checkpointing is decided by memory); kept so that older run configs load."""
    tool_parser: str = "auto"
    """Tool-call format the policy writes and the rollout parses: `auto` (read off the chat template), `hermes`
    (Qwen2.5/Qwen3 `<tool_call>` JSON), `qwen3_coder` (`<tool_call><function=…>` XML), `llama3_json` (Llama 3.1/3.2
    JSON calls), `mistral` (`[TOOL_CALLS]`) or `pythonic` (LFM2's `<|tool_call_start|>[f(x=1)]<|tool_call_end|>`)."""
    chat_template: str | None = None
    """A Jinja chat template file to use instead of the tokenizer's own; None keeps the tokenizer's."""
    enable_thinking: bool | None = None
    """Passed to the chat template as `enable_thinking` (Qwen3-style reasoning on or off); None = the template's
    default."""
    weight_sync: str = "auto"
    """How `policy.backend=openai` servers get the learner's weights after each step: `auto` (whatever the server
    supports, checked before training starts), `agentrl` (`agentrl serve`'s weight-update endpoint), `vllm` (`vllm
    serve` in dev mode on this machine: vLLM's in-place reload from files the trainer writes), `trl` (TRL's `trl
    vllm-serve` NCCL weight transfer) or `none` (the servers keep their weights; needs `off_policy=true`)."""
    weight_sync_token: str | None = None
    """Bearer token of the servers' weight-update endpoint (default: $AGENTRL_WEIGHTS_TOKEN)."""
    off_policy: bool = False
    """Allow training against samplers that never receive new weights (a server that cannot update, or
    `weight_sync=none`): every step then samples from the initial weights, and the logged sampler–learner
    logprob gap grows."""
    allow_unseen_tools: bool = False
    """Train even when the policy can see none of the episode's tools: its chat template renders no tool schemas
    and it never learned them from demonstrations (the shipped tiny policies know only their bundled tools). Such
    a policy does not call them, so this needs a system prompt that describes them."""
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    """The in-process vLLM engine (`backend=vllm`)."""

    @property
    def base_urls(self) -> tuple[str, ...]:
        """`base_url` as one URL per server (a comma-separated string split); empty when unset."""
        from agentrl.policy.server_pool import server_urls

        return server_urls(self.base_url)
