"""The learner's numerics: fp32 master weights under bf16 autocast, chunked log-probs inside `Learner.update`, the
learning-rate schedule with its checkpointed state, and the ratio the named losses act through (mini-batches, update
epochs, Dr. GRPO's constant)."""

import copy
import dataclasses
import math
import random

import pytest
import torch

from agentrl.errors import ConfigError
from agentrl.tiny.model import tiny_qwen2, tiny_qwen2_config
from agentrl.train.config import TrainerConfig
from agentrl.train.learner import Learner
from agentrl.train.precision import resolve_precision
from agentrl.train.samples import TrainSample
from agentrl.train.schedule import learning_rate

pytestmark = pytest.mark.unit

VOCAB = 48


def small_model(seed: int = 0) -> torch.nn.Module:
    return tiny_qwen2(tiny_qwen2_config(VOCAB, hidden_size=64, num_hidden_layers=2), seed=seed)


def make_samples(n: int = 6, seed: int = 0) -> list[TrainSample]:
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        prompt, turn = rng.randint(2, 5), rng.randint(4, 9)
        mask = [False] * prompt + [True] * turn
        advantage = 1.0 if i % 2 == 0 else -0.8
        samples.append(
            TrainSample(
                token_ids=tuple(rng.randint(1, VOCAB - 1) for _ in mask),
                loss_mask=tuple(mask),
                advantages=tuple(advantage if m else 0.0 for m in mask),
                sampler_logprobs=tuple(-rng.random() * 3 if m else 0.0 for m in mask),
            )
        )
    return samples


def changed_fraction(model: torch.nn.Module, before: dict[str, torch.Tensor]) -> float:
    changed = sum(int((p.detach() != before[n]).sum()) for n, p in model.named_parameters())
    return changed / sum(p.numel() for p in model.parameters())


# --- precision ----------------------------------------------------------------------------------------------


def masters_of(learner: Learner) -> dict[str, torch.Tensor]:
    return {name: w.clone() for name, w in learner.optimizer.master_weights().items()}


def test_bf16_mixed_keeps_fp32_masters_that_take_rl_sized_updates_and_bf16_weights_alone_mostly_do_not():
    fractions = {}
    for precision, dtype in (("bf16-mixed", torch.float32), ("bf16", torch.bfloat16)):
        model = small_model().to(dtype)
        before = {n: p.detach().float().clone() for n, p in model.named_parameters()}
        learner = Learner(model, TrainerConfig(lr=1e-6, precision=precision), pad_token_id=0)
        assert all(p.dtype == torch.bfloat16 for p in model.parameters())  # what the passes and the sampler use
        learner.update(make_samples())
        masters = learner.optimizer.master_weights()
        assert all(
            w.dtype == (torch.float32 if precision == "bf16-mixed" else torch.bfloat16) for w in masters.values()
        )
        changed = sum(int((masters[n].float() != before[n]).sum()) for n in before)
        fractions[precision] = changed / sum(w.numel() for w in before.values())
        for name, p in model.named_parameters():  # each step wrote the masters back, rounded once
            assert torch.equal(p.detach(), masters[name].to(torch.bfloat16)), name
    # fp32 master weights take nearly every update (the rest: embedding rows of tokens the batch never saw);
    # in bf16 a 1e-6 step is below the spacing of all but the tiniest weights
    assert fractions["bf16-mixed"] > 0.9, fractions
    assert fractions["bf16"] < 0.1, fractions


def test_bf16_mixed_computes_in_bf16_without_autocast_and_sums_gradients_in_fp32():
    model, ref_model = small_model(), small_model(seed=1)
    seen: dict[str, set] = {"policy": set(), "reference": set()}

    def hook(name):
        return lambda mod, i, out: seen[name].add((out.dtype, torch.is_autocast_enabled("cpu")))

    for name, m in (("policy", model), ("reference", ref_model)):
        m.model.layers[0].mlp.down_proj.register_forward_hook(hook(name))
    config = TrainerConfig(lr=1e-6, precision="bf16-mixed", minibatches_per_step=2, kl_coef=0.1)
    config = dataclasses.replace(config, max_tokens_per_microbatch=12)  # several micro-batches per step
    learner = Learner(model, config, pad_token_id=0, ref_model=ref_model)
    sums = []
    original = learner.optimizer.accumulate

    def accumulate():
        original()
        sums.append({m.grad.dtype for m in learner.optimizer.masters if m.grad is not None})

    learner.optimizer.accumulate = accumulate
    metrics = learner.update(make_samples())
    assert seen == {"policy": {(torch.bfloat16, False)}, "reference": {(torch.bfloat16, False)}}
    assert metrics["microbatches"] > 2 and sums and all(dtypes == {torch.float32} for dtypes in sums)
    assert all(p.grad is None for p in model.parameters())  # moved into the masters' sums after each backward
    assert math.isfinite(metrics["loss"]) and metrics["kl"] > 0


def test_bf16_mixed_state_round_trips_through_its_fp32_masters_exactly():
    config = TrainerConfig(lr=1e-5, precision="bf16-mixed", minibatches_per_step=2)
    first = Learner(small_model(), config, pad_token_id=0)
    first.update(make_samples())
    state = copy.deepcopy(first.state_dict())
    assert all(w.dtype == torch.float32 for w in state["weights"].values())
    resumed = Learner(small_model(seed=3), config, pad_token_id=0)
    resumed.load_state_dict(state)
    first.update(make_samples(seed=1))
    resumed.update(make_samples(seed=1))
    a, b = masters_of(first), masters_of(resumed)
    assert all(torch.equal(a[n], b[n]) for n in a)


def test_precision_resolution():
    fp32, bf16 = [torch.zeros(1)], [torch.zeros(1, dtype=torch.bfloat16)]
    assert resolve_precision("auto", fp32) == "fp32"  # no CUDA here
    assert resolve_precision("auto", bf16) == "bf16"
    assert resolve_precision("bf16-mixed", fp32) == "bf16-mixed"
    assert resolve_precision("bf16-mixed", bf16) == "bf16-mixed"  # masters start from the bf16 values
    with pytest.raises(ConfigError, match="policy.dtype"):
        resolve_precision("fp32", bf16)
    with pytest.raises(ConfigError, match="unknown trainer.precision"):
        resolve_precision("fp16", fp32)


# --- chunked log-probs inside the learner ---------------------------------------------------------------------


@pytest.mark.parametrize("entropy_coef", [0.0, 0.05])
def test_chunked_update_equals_the_one_pass_update(entropy_coef):
    results = []
    for chunk in (0, 5):
        model = small_model().double()
        config = TrainerConfig(
            lr=1e-3, logprob_chunk_tokens=chunk, entropy_coef=entropy_coef, minibatches_per_step=2, max_grad_norm=0
        )
        # a tight micro-batch budget: gradients accumulate over micro-batches and over chunks within them
        config = dataclasses.replace(config, max_tokens_per_microbatch=20)
        metrics = Learner(model, config, pad_token_id=0, temperature=0.9).update(make_samples(8))
        results.append((model, metrics))
    (one_pass, m0), (chunked, m1) = results
    for name in ("loss", "pg_loss", "entropy", "grad_norm", "sampler_logprob_abs_diff", "microbatches"):
        assert m1[name] == pytest.approx(m0[name], rel=1e-10, abs=1e-12), name
    for (name, a), (_, b) in zip(one_pass.named_parameters(), chunked.named_parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12, msg=name)


# --- the learning-rate schedule -------------------------------------------------------------------------------


def test_schedule_values_at_warmup_mid_and_end():
    cosine = dict(peak_lr=1.0, total_steps=14, schedule="cosine", warmup_steps=4, min_lr_ratio=0.1)
    assert learning_rate(0, **cosine) == 0.0
    assert learning_rate(1, **cosine) == pytest.approx(0.25)
    assert learning_rate(4, **cosine) == pytest.approx(1.0)
    assert learning_rate(9, **cosine) == pytest.approx(0.55)  # halfway between the peak and the floor
    assert learning_rate(14, **cosine) == pytest.approx(0.1)
    assert learning_rate(20, **cosine) == pytest.approx(0.1)
    constant = dict(cosine, schedule="constant")
    assert [learning_rate(k, **constant) for k in (2, 4, 9, 14)] == pytest.approx([0.5, 1.0, 1.0, 1.0])


def test_learner_follows_the_schedule_in_optimizer_steps_and_logs_it():
    config = TrainerConfig(lr=1e-3, steps=3, minibatches_per_step=2, lr_schedule="cosine", warmup_steps=2)
    learner = Learner(small_model(), config, pad_token_id=0)
    logged = [learner.update(make_samples(seed=s))["lr"] for s in range(3)]
    # optimizer steps 2, 4 and 6 of 6 end the three steps: the peak, then cosine down to 0
    assert logged == pytest.approx([1e-3, 1e-3 * 0.5 * (1 + math.cos(math.pi / 2)), 0.0])
    assert learner.optimizer_steps == 6


def test_schedule_state_round_trips_and_an_old_checkpoint_still_loads():
    config = TrainerConfig(
        lr=1e-3, steps=4, lr_schedule="cosine", warmup_steps=1, min_lr_ratio=0.2, minibatches_per_step=1
    )
    first = Learner(small_model(), config, pad_token_id=0)
    for seed in range(2):
        first.update(make_samples(seed=seed))
    state = copy.deepcopy(first.state_dict())
    assert state["optimizer_steps"] == 2

    resumed = Learner(small_model(), config, pad_token_id=0)
    resumed.load_state_dict(state)
    assert resumed.update(make_samples(seed=5))["lr"] == first.update(make_samples(seed=5))["lr"]
    assert resumed.optimizer_steps == 3

    old = {key: value for key, value in state.items() if key != "optimizer_steps"}  # written before the schedule
    legacy = Learner(small_model(), dataclasses.replace(config, minibatches_per_step=2), pad_token_id=0)
    legacy.load_state_dict(old)
    assert legacy.step == 2 and legacy.optimizer_steps == 4


def test_unknown_schedule_is_a_config_error():
    with pytest.raises(ConfigError, match="lr_schedule"):
        Learner(small_model(), TrainerConfig(lr_schedule="linear"), pad_token_id=0)


# --- the ratio the named losses act through --------------------------------------------------------------------


def repeated_samples(n: int = 8) -> list[TrainSample]:
    """One trajectory sampled n times with A = +1: each optimizer step raises its tokens' probability, so the next
    mini-batch sees ρ > 1 on the very same tokens."""
    return [make_samples(1)[0]] * n


def max_param_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    pairs = zip(a.parameters(), b.parameters(), strict=True)
    return max(float((pa.detach() - pb.detach()).abs().max()) for pa, pb in pairs)


def test_ppo_clip_aepo_and_gspo_give_different_parameters_after_one_default_step():
    models, metrics = {}, {}
    for loss in ("ppo_clip", "aepo", "gspo"):
        models[loss] = small_model()
        metrics[loss] = Learner(models[loss], TrainerConfig(loss=loss), pad_token_id=0).update(repeated_samples())
        assert metrics[loss]["optimizer_steps"] == TrainerConfig().minibatches_per_step > 1
    # the upper clip binds: PPO drops those tokens' gradient, AEPO keeps (1 + ε_high)·A, GSPO clips whole sequences
    assert metrics["ppo_clip"]["clip_frac_high"] > 0 and metrics["gspo"]["clip_frac_high"] > 0
    for a, b in (("ppo_clip", "aepo"), ("ppo_clip", "gspo"), ("aepo", "gspo")):
        assert max_param_difference(models[a], models[b]) > 1e-5, (a, b)


def test_one_optimizer_step_per_batch_has_ratio_one_and_refuses_the_losses_that_need_more():
    metrics = Learner(small_model(), TrainerConfig(minibatches_per_step=1), pad_token_id=0).update(repeated_samples())
    assert metrics["optimizer_steps"] == 1
    assert metrics["clip_frac_high"] == metrics["clip_frac_low"] == 0.0  # ppo_clip is the plain policy gradient
    for loss in ("aepo", "gspo", "cispo", "kl_cov"):
        with pytest.raises(ConfigError) as refused:
            Learner(small_model(), TrainerConfig(loss=loss, minibatches_per_step=1, update_epochs=1), pad_token_id=0)
        # one line naming the keys to change and the alternative
        message = str(refused.value)
        assert "\n" not in message and f"trainer.loss={loss}" in message, message
        for key in ("trainer.minibatches_per_step", "trainer.update_epochs", "trainer.loss=ppo_clip"):
            assert key in message, (key, message)


def test_update_epochs_reuse_the_batch_with_the_pre_update_policy_as_old():
    config = TrainerConfig(minibatches_per_step=1, update_epochs=3, loss="gspo", lr=1e-3, steps=2)
    learner = Learner(small_model(), config, pad_token_id=0)
    assert learner.total_optimizer_steps == 6
    metrics = learner.update(repeated_samples(2))
    assert metrics["optimizer_steps"] == 3 and learner.optimizer_steps == 3
    # epoch 1 is on-policy; epochs 2 and 3 see the moved policy, and GSPO's 4e-4 clip cuts every sequence there
    assert metrics["clip_frac_high"] == pytest.approx(2 / 3)


def test_minibatch_order_is_a_permutation_seeded_by_step_and_epoch():
    learner = Learner(small_model(), TrainerConfig(update_epochs=2), pad_token_id=0)
    first, second = learner._orders(32)
    assert sorted(first) == sorted(second) == list(range(32)) and first != list(range(32))
    assert learner._orders(32)[0] == first and second != first
    learner.step = 1
    assert learner._orders(32)[0] != first
    single = Learner(small_model(), TrainerConfig(minibatches_per_step=1, update_epochs=2), pad_token_id=0)
    assert single._orders(32) == [list(range(32))] * 2


def test_dr_grpo_constant_is_the_episode_budget_and_ignores_prompt_and_tool_tokens():
    samples = make_samples(4)
    # the same trajectories behind a 40-token masked prefix: longer sequences, the same policy tokens
    prefixed = [
        TrainSample(
            token_ids=(1,) * 40 + s.token_ids,
            loss_mask=(False,) * 40 + s.loss_mask,
            advantages=(0.0,) * 40 + s.advantages,
            sampler_logprobs=(0.0,) * 40 + s.sampler_logprobs,
        )
        for s in samples
    ]
    # at ρ = 1 the policy loss is −Σ_i Σ_t A_it / (sequences · MAX_TOKENS)
    expected = -sum(a for s in samples for a, m in zip(s.advantages[1:], s.loss_mask[1:], strict=True) if m) / 4
    config = TrainerConfig(minibatches_per_step=1, loss_agg="seq-mean-token-sum-norm")
    for batch in (samples, prefixed):
        metrics = Learner(small_model(), config, pad_token_id=0, episode_token_budget=300).update(batch)
        assert metrics["pg_loss"] == pytest.approx(expected / 300, rel=1e-5)
    override = dataclasses.replace(config, loss_agg_norm_tokens=50)
    metrics = Learner(small_model(), override, pad_token_id=0, episode_token_budget=300).update(samples)
    assert metrics["pg_loss"] == pytest.approx(expected / 50, rel=1e-5)


def test_a_bf16_mixed_checkpoint_saves_the_fp32_masters_and_its_policy_loads_with_transformers(tmp_path):
    from transformers import AutoModelForCausalLM

    from agentrl.testing.families import family_model
    from agentrl.train.checkpoint import TrainerState, load_checkpoint, save_checkpoint

    config = TrainerConfig(lr=1e-5, precision="bf16-mixed", minibatches_per_step=1)
    model, tokenizer = family_model("qwen3", hidden_size=64, layers=2)
    learner = Learner(model, config, pad_token_id=0)
    samples = [dataclasses.replace(s, token_ids=tuple(t + 10 for t in s.token_ids)) for s in make_samples()]
    learner.update(samples)
    saved = save_checkpoint(tmp_path, TrainerState(1, 0.0, 1), model, tokenizer, learner)
    resumed_model, _ = family_model("qwen3", hidden_size=64, layers=2, seed=5)
    resumed = Learner(resumed_model, config, pad_token_id=0)
    load_checkpoint(saved, resumed_model, resumed)
    a, b = masters_of(learner), masters_of(resumed)
    assert all(w.dtype == torch.float32 for w in b.values()) and all(torch.equal(a[n], b[n]) for n in a)
    exported = AutoModelForCausalLM.from_pretrained(saved / "policy")
    assert sum(p.numel() for p in exported.parameters()) == sum(p.numel() for p in model.parameters())
