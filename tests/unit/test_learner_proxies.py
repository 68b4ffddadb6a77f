"""CPU proxies of the learner's GPU speed, enforced as counts: aten ops per update against a plain forward/backward
of the same tokens, host syncs per micro-batch, host→device copies per micro-batch, padding efficiency; and the
pieces they rest on: packed log-probs equal each sample's alone, activation checkpointing decided by memory,
truncated importance sampling on where the sampler–learner gap exceeds fp32 rounding."""

import copy
import random

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from agentrl.rollout.config import RolloutConfig
from agentrl.testing.families import family_model
from agentrl.train.checkpointing_policy import ModelShape, apply_checkpointing, recomputed_layers
from agentrl.train.config import TrainerConfig
from agentrl.train.forward import forward_logprobs_B_T1
from agentrl.train.learner import DEFAULT_EPISODE_TOKEN_BUDGET, Learner, resolve_tis_cap
from agentrl.train.packed_attention import enable_packing, packed_inputs
from agentrl.train.packing import pack, padding_efficiency, plan_packed
from agentrl.train.samples import TrainSample, collate, plan_microbatches

pytestmark = pytest.mark.unit

CPU = torch.device("cpu")


def samples_of(lengths, vocab, seed=0):
    rng = random.Random(seed)
    out = []
    for i, length in enumerate(lengths):
        prompt = max(1, length // 4)
        mask = [False] * prompt + [rng.random() < 0.8 for _ in range(length - prompt)]
        advantage = 1.0 if i % 2 else -0.5
        out.append(
            TrainSample(
                tuple(rng.randint(3, vocab - 1) for _ in range(length)),
                tuple(mask),
                tuple(advantage if m else 0.0 for m in mask),
                tuple(-1.5 if m else 0.0 for m in mask),
            )
        )
    return out


def qwen3(layers=4, seed=0):
    return family_model("qwen3", hidden_size=64, layers=layers, seed=seed)[0]


class AtenOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


class HostReads:
    """Counts every read of a tensor's value on the host, process-wide (the sampler and FSDP use other threads)."""

    NAMES = ("item", "tolist", "cpu", "__bool__", "__float__", "__int__")

    def __enter__(self):
        self.count = 0
        self.saved = {name: getattr(torch.Tensor, name) for name in self.NAMES}
        for name, original in self.saved.items():
            setattr(torch.Tensor, name, self._counting(original))
        return self

    def _counting(self, original):
        def read(tensor, *args, **kwargs):
            self.count += 1
            return original(tensor, *args, **kwargs)

        return read

    def __exit__(self, *exc):
        for name, original in self.saved.items():
            setattr(torch.Tensor, name, original)


# --- op counts and host syncs ---------------------------------------------------------------------------------


def plain_update(model, samples, budget):
    """A plain forward/backward of the same packed tokens (cross-entropy at the loss positions) and a fused AdamW
    step: what the learner's update should cost, give or take its objective."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)

    def run():
        for plan in plan_packed([len(s.token_ids) for s in samples], budget):
            batch = pack([samples[i] for i in plan], CPU)
            logits = model(**packed_inputs(batch), use_cache=False).logits
            loss = torch.nn.functional.cross_entropy(logits[0].index_select(0, batch.source_N), batch.targets_N)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()

    return run


def test_an_update_costs_at_most_a_plain_forward_backward_and_optimizer_step_plus_15_percent():
    # Four layers: the objective's ops are a fixed cost per micro-batch (~170), a model's a cost per layer; real
    # models have 24 to 36 layers, where the margin is wider still.
    model = qwen3()
    samples = samples_of([20, 47, 120, 64, 33, 90, 12, 75], model.config.vocab_size)
    plain_model = copy.deepcopy(model)
    learner = Learner(model, TrainerConfig(lr=1e-5, minibatches_per_step=1), pad_token_id=0)
    learner.update(samples)  # first passes check the projection, once
    with AtenOps() as ours:
        learner.update(samples)
    enable_packing(plain_model)
    plain = plain_update(plain_model, samples, TrainerConfig().max_tokens_per_microbatch)
    plain()
    with AtenOps() as reference:
        plain()
    assert ours.count <= 1.15 * reference.count, (ours.count, reference.count)


@pytest.mark.parametrize("minibatches", [1, 4])
def test_an_update_reads_the_device_at_most_once_per_micro_batch(minibatches):
    model = qwen3(layers=2)
    samples = samples_of([20, 47, 120, 64, 33, 90, 12, 75], model.config.vocab_size)
    config = TrainerConfig(lr=1e-5, minibatches_per_step=minibatches, max_tokens_per_microbatch=160)
    learner = Learner(model, config, pad_token_id=0)
    learner.update(samples)
    with HostReads() as reads:
        metrics = learner.update(samples)
    assert metrics["microbatches"] >= 3
    assert reads.count <= metrics["microbatches"], reads.count
    assert reads.count == 1  # the metrics, read back once per update


def test_a_micro_batch_reaches_the_device_in_one_copy():
    samples = samples_of([20, 47, 120], 100)
    copies = []
    original = torch.Tensor.to

    def to(tensor, *args, **kwargs):
        out = original(tensor, *args, **kwargs)
        if tensor.device.type == "cpu" and out.device.type != "cpu":
            copies.append(out.shape)
        return out

    torch.Tensor.to = to
    try:
        batch = pack(samples, torch.device("meta"))
        padded = collate(samples, 0, torch.device("meta"))
    finally:
        torch.Tensor.to = original
    assert len(copies) == 2  # one each
    assert batch.input_ids_B_T.device.type == padded.mask_S_T1.device.type == "meta"
    assert batch.targets_N.dtype == torch.long and batch.advantages_S_T1.dtype == torch.float32


# --- packing -----------------------------------------------------------------------------------------------------


def realistic_lengths(n=64, seed=0):
    """Agent episodes: a prompt of a few hundred tokens, then a long-tailed number of turns."""
    rng = random.Random(seed)
    return [min(8192, int(rng.uniform(200, 600) + rng.lognormvariate(6.5, 0.8))) for _ in range(n)]


def test_packed_micro_batches_compute_no_padding_and_nearly_fill_the_budget():
    lengths, budget = realistic_lengths(), 16384
    plans = plan_packed(lengths, budget)
    assert sorted(i for plan in plans for i in plan) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in plan) <= budget for plan in plans)
    assert padding_efficiency(lengths, plans, packed=True) >= 0.9
    assert len(plans) <= -(-sum(lengths) // budget) + 1  # first-fit decreasing: at most one micro-batch over
    padded = plan_microbatches(lengths, budget)
    assert len(plans) < len(padded)  # the padded planner needs more passes for the same tokens


def test_a_packed_micro_batch_gives_each_samples_own_log_probs():
    model = qwen3(layers=2).double()
    assert enable_packing(model)
    samples = samples_of([9, 23, 5, 14], model.config.vocab_size)
    packed, _ = forward_logprobs_B_T1(model, pack(samples, CPU), chunk_tokens=7)
    padded, _ = forward_logprobs_B_T1(model, collate(samples, 0, CPU), chunk_tokens=7)
    for row, sample in enumerate(samples):
        alone, _ = forward_logprobs_B_T1(model, pack([sample], CPU), chunk_tokens=0)
        n = len(sample.token_ids) - 1
        torch.testing.assert_close(packed[row, :n], alone[0], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(padded[row, :n], alone[0], rtol=1e-10, atol=1e-12)
    # and the packing matters: the same row without per-sample attention scores the later samples differently
    fields = ("token_ids", "loss_mask", "advantages", "sampler_logprobs")
    joined = TrainSample(*(tuple(x for s in samples for x in getattr(s, f)) for f in fields))
    leaked, _ = forward_logprobs_B_T1(model, pack([joined], CPU), chunk_tokens=7)
    second = torch.tensor(samples[1].loss_mask[1:])  # the second sample's targets: joined positions 9..30
    assert second.any() and not torch.allclose(leaked[0, 9:31][second], packed[1, :22][second])


def test_a_sampler_without_packing_support_keeps_its_attention():
    model = qwen3(layers=2)
    ids = torch.tensor([[5, 6, 7, 8], [0, 9, 10, 11]])
    mask = torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1]])
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=mask).logits
        assert enable_packing(model)
        after = model(input_ids=ids, attention_mask=mask).logits  # no packed_segments: the model's own attention
    assert model.config._attn_implementation.startswith("agentrl_packed|")
    torch.testing.assert_close(after, before, rtol=0, atol=0)


# --- activation checkpointing by memory ---------------------------------------------------------------------------

QWEN3_06B = ModelShape(
    parameters=596_000_000,
    trainable=596_000_000,
    layers=28,
    hidden=1024,
    intermediate=3072,
    vocab=151_936,
    param_bytes=2,
)


def test_checkpointing_is_off_when_the_update_fits_and_grows_layer_by_layer_as_memory_shrinks():
    gib = 2**30
    assert recomputed_layers(QWEN3_06B, 4096, 80 * gib) == 0
    assert recomputed_layers(QWEN3_06B, 16384, 80 * gib) == 0
    counts = [recomputed_layers(QWEN3_06B, 16384, m * gib) for m in (64, 48, 40, 32, 24)]
    assert counts == sorted(counts) and counts[0] < counts[-1]
    assert 0 < recomputed_layers(QWEN3_06B, 16384, 40 * gib) < 28  # selective: some layers, not all
    assert recomputed_layers(QWEN3_06B, 16384, 8 * gib) == 28
    assert recomputed_layers(QWEN3_06B, 65536, 80 * gib) > recomputed_layers(QWEN3_06B, 32768, 80 * gib)


def test_the_learner_switches_on_exactly_the_layers_the_plan_names():
    model = qwen3(layers=4)
    assert apply_checkpointing(model, 2) == 2
    flags = [layer.gradient_checkpointing for layer in model.model.layers]
    assert flags == [True, False, True, False]
    tiny = Learner(qwen3(layers=2), TrainerConfig(), pad_token_id=0)  # fits the CPU's memory many times over
    assert tiny.recomputed_layers == 0
    forced = Learner(qwen3(layers=2), TrainerConfig(), pad_token_id=0, activation_checkpointing=True)
    assert forced.recomputed_layers == 2


# --- the sampler–learner gap ------------------------------------------------------------------------------------------


def test_truncated_importance_sampling_is_on_where_the_gap_exceeds_fp32_rounding():
    default = TrainerConfig()
    assert resolve_tis_cap(default, "fp32", remote_sampler=False) == 0.0
    assert resolve_tis_cap(default, "bf16-mixed", remote_sampler=False) == 2.0
    assert resolve_tis_cap(default, "bf16", remote_sampler=False) == 2.0
    assert resolve_tis_cap(default, "fp32", remote_sampler=True) == 2.0
    explicit = TrainerConfig(tis_cap=0.0)
    assert resolve_tis_cap(explicit, "bf16-mixed", remote_sampler=True) == 0.0
    learner = Learner(qwen3(layers=2), TrainerConfig(precision="bf16-mixed"), pad_token_id=0)
    assert learner.tis_cap == 2.0 and learner.objective.config.tis_cap == 2.0
    assert "tis_weight" in learner.update(samples_of([12, 20], 100))


def test_the_learners_default_episode_budget_is_the_rollouts():
    assert DEFAULT_EPISODE_TOKEN_BUDGET == RolloutConfig.max_tokens_per_episode


# --- model FLOPs for MFU ----------------------------------------------------------------------------------------------


def test_update_flops_count_every_pass_an_update_makes():
    from agentrl.train.flops import forward_flops, update_flops

    model = qwen3(layers=2)  # hidden 64, 4 heads of 16, MLP 128, tied embeddings
    body = 2 * (64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 3 * 64 * 128)
    vocab = model.config.vocab_size
    samples = samples_of([10, 20], vocab)
    loss_tokens = sum(s.num_loss_tokens for s in samples)
    forward = 2 * body * 30 + 4 * 2 * 64 * (10**2 + 20**2) + 2 * 64 * vocab * loss_tokens
    assert forward_flops(model, [10, 20], loss_tokens) == forward
    one_step = update_flops(model, samples, TrainerConfig(minibatches_per_step=1))
    assert one_step == {"training": 3 * forward, "old_policy": 0.0, "reference": 0.0, "total": 3 * forward}
    full = update_flops(model, samples, TrainerConfig(minibatches_per_step=2, update_epochs=2, kl_coef=0.1))
    assert full == {"training": 6 * forward, "old_policy": forward, "reference": 2 * forward, "total": 9 * forward}
