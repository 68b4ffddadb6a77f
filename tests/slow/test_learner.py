"""Real optimisation steps of the Learner on a tiny random Qwen2."""

import copy
import dataclasses
import random

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from agentrl.config import TrainerConfig
from agentrl.train.learner import Learner
from agentrl.train.samples import TrainSample, plan_microbatches, split_minibatches

pytestmark = pytest.mark.slow

PAD = 0


def tiny_model(seed: int = 0, dtype: torch.dtype = torch.float64) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(config).to(dtype)


def make_samples(n: int = 6, seed: int = 0) -> list[TrainSample]:
    """Prompt (masked) → sampled span → tool output (masked) → sampled span, with ± advantages."""
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        prompt, turn1 = rng.randint(1, 5), rng.randint(2, 8)
        tool, turn2 = rng.randint(1, 6), rng.randint(0, 6)
        length = prompt + turn1 + tool + turn2
        mask = [False] * prompt + [True] * turn1 + [False] * tool + [True] * turn2
        advantage = 1.0 if i % 2 == 0 else -0.7
        samples.append(
            TrainSample(
                token_ids=tuple(rng.randint(1, 63) for _ in range(length)),
                loss_mask=tuple(mask),
                advantages=tuple(advantage if m else 0.0 for m in mask),
                sampler_logprobs=tuple(-rng.random() * 3 if m else 0.0 for m in mask),
            )
        )
    return samples


def config(**overrides) -> TrainerConfig:
    return dataclasses.replace(TrainerConfig(lr=1e-3, max_grad_norm=1.0), **overrides)


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def assert_same_params(a: torch.nn.Module, b: torch.nn.Module, exact: bool = False) -> None:
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=False):
        if exact:
            assert torch.equal(pa, pb), name
        else:
            torch.testing.assert_close(pa, pb, rtol=1e-9, atol=1e-11, msg=name)


def test_microbatch_planning():
    assert [list(r) for r in split_minibatches(5, 2)] == [[0, 1], [2, 3, 4]]
    assert [list(r) for r in split_minibatches(2, 4)] == [[0], [1]]
    # longest first; 3 rows × 10 > 25 closes the batch; a sample longer than the budget stands alone
    assert plan_microbatches([4, 10, 9, 30, 2], 25) == [[3], [1, 2], [0, 4]]
    assert plan_microbatches([3, 3, 3], 1000) == [[0, 1, 2]]


def test_updates_change_parameters_and_keep_loss_finite():
    model = tiny_model(dtype=torch.float32)
    learner = Learner(model, config(minibatches_per_step=2, entropy_coef=0.01), pad_token_id=PAD)
    before = params(model)
    samples = make_samples()
    for _ in range(3):
        metrics = learner.update(samples)
        assert all(isinstance(v, float) for v in metrics.values())
        assert torch.isfinite(torch.tensor(list(metrics.values()))).all(), metrics
    assert metrics["tokens"] == sum(s.num_loss_tokens for s in samples)
    assert metrics["sequences"] == 6 and metrics["microbatches"] >= 2 and metrics["grad_norm"] > 0
    assert metrics["entropy"] > 0 and metrics["sampler_logprob_abs_diff"] > 0
    for key in (
        "loss",
        "pg_loss",
        "kl",
        "clip_frac_low",
        "clip_frac_high",
        "clip_frac_dual",
        "lr",
        "approx_kl_to_sampler",
        "train_tokens_per_s",
    ):
        assert key in metrics
    changed = [name for name, p in model.named_parameters() if not torch.equal(p, before[name])]
    assert len(changed) == len(before)
    assert learner.step == 3


def test_masked_positions_do_not_matter():
    samples = make_samples()
    scrambled = [
        dataclasses.replace(
            s,
            advantages=tuple(a if m else 1e6 for a, m in zip(s.advantages, s.loss_mask, strict=False)),
            sampler_logprobs=tuple(lp if m else -1e4 for lp, m in zip(s.sampler_logprobs, s.loss_mask, strict=False)),
        )
        for s in samples
    ]
    results = []
    for batch in (samples, scrambled):
        model = tiny_model()
        metrics = Learner(model, config(minibatches_per_step=2), pad_token_id=PAD).update(batch)
        results.append((model, metrics))
    assert_same_params(results[0][0], results[1][0], exact=True)
    assert results[0][1]["sampler_logprob_abs_diff"] == results[1][1]["sampler_logprob_abs_diff"]


@pytest.mark.parametrize("last_token_trained", [False, True])
def test_masked_tokens_get_zero_gradient(last_token_trained):
    # Token t is scored by the logits at t−1, so the loss tokens are 6 and 7 (and 63 in the control). Input
    # embeddings of 7 (position 2) and 62 (position 3) reach the loss only through positions ≥ 2, whose logits
    # score 62 and 63 — masked tool output. Their rows must get exactly zero gradient, which Adam leaves
    # untouched; training the last token is the control showing the test can see a leak.
    model = tiny_model()
    mask = (False, True, True, False, last_token_trained)
    sample = TrainSample(
        token_ids=(5, 6, 7, 62, 63),
        loss_mask=mask,
        advantages=tuple(1.0 if m else 0.0 for m in mask),
        sampler_logprobs=(0.0, -1.0, -1.0, 0.0, -1.0),
    )
    before = model.model.embed_tokens.weight.detach().clone()
    Learner(model, config(lr=1e-3), pad_token_id=PAD).update([sample])
    changed_rows = (model.model.embed_tokens.weight != before).any(dim=1).nonzero().flatten().tolist()
    assert changed_rows == ([5, 6, 7, 62] if last_token_trained else [5, 6])


@pytest.mark.parametrize("chunk", [0, 3])
@pytest.mark.parametrize("minibatches", [1, 2])
@pytest.mark.parametrize(
    "loss_agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
)
def test_gradient_accumulation_is_exact(loss_agg, minibatches, chunk):
    samples = make_samples(8)
    models = []
    for budget in (1, 100_000):
        model = tiny_model()
        trainer = config(
            max_tokens_per_microbatch=budget,
            loss_agg=loss_agg,
            minibatches_per_step=minibatches,
            logprob_chunk_tokens=chunk,
        )
        metrics = Learner(model, trainer, pad_token_id=PAD).update(samples)
        models.append(model)
        assert metrics["microbatches"] == (8 if budget == 1 else minibatches)
    assert_same_params(*models)


@pytest.mark.parametrize(
    ("loss", "tis_mode"),
    [("aepo", "token"), ("gspo", "sequence"), ("cispo", "token_mask"), ("ppo_clip", "sequence_mask")],
)
def test_gradient_accumulation_is_exact_over_epochs_losses_and_importance_weights(loss, tis_mode):
    # Clip-Cov and KL-Cov are left out: their token selection spans one micro-batch, as in their paper's code.
    samples = make_samples(8)
    models = []
    for budget in (1, 100_000):
        model = tiny_model()
        trainer = config(
            loss=loss,
            tis_cap=1.5,
            tis_mode=tis_mode,
            tis_floor=0.2 if tis_mode == "token_mask" else 0.0,
            update_epochs=2,
            minibatches_per_step=2,
            max_tokens_per_microbatch=budget,
        )
        metrics = Learner(model, trainer, pad_token_id=PAD).update(samples)
        assert metrics["optimizer_steps"] == 4 and metrics["tis_weight"] > 0
        models.append(model)
    assert_same_params(*models)


def test_state_dict_round_trip_resumes_exactly():
    samples = make_samples()
    model_a = tiny_model()
    learner_a = Learner(model_a, config(), pad_token_id=PAD)
    learner_a.update(samples)

    model_b = tiny_model(seed=1)
    model_b.load_state_dict(model_a.state_dict())
    learner_b = Learner(model_b, config(), pad_token_id=PAD)
    state = copy.deepcopy(learner_a.state_dict())
    learner_b.load_state_dict(state)
    assert learner_b.step == 1

    next_samples = make_samples(seed=1)
    learner_a.update(next_samples)
    learner_b.update(next_samples)
    assert_same_params(model_a, model_b, exact=True)

    # without the optimizer state the next step differs (Adam moments matter)
    model_c = tiny_model(seed=1)
    model_c.load_state_dict(model_b.state_dict())
    fresh = Learner(model_c, config(), pad_token_id=PAD)
    learner_b.update(samples)
    fresh.update(samples)
    assert not torch.equal(model_b.lm_head.weight, model_c.lm_head.weight)


def test_lora_trains_only_adapters_and_is_its_own_reference():
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(
        tiny_model(dtype=torch.float32), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    # one optimizer step per batch: the whole first step sees the adapter at its initial zero
    learner = Learner(model, config(kl_coef=0.1, minibatches_per_step=1), pad_token_id=PAD)
    assert learner.params and all("lora_" in name for name, p in model.named_parameters() if p.requires_grad)
    before = params(model)
    first = learner.update(make_samples())
    assert first["kl"] == pytest.approx(0.0, abs=1e-12)  # lora_B starts at zero: adapter off == adapter on
    second = learner.update(make_samples())
    assert second["kl"] > 0
    for name, p in model.named_parameters():
        if "lora_" in name:
            continue
        assert torch.equal(p, before[name]), name
    assert any(not torch.equal(p, before[n]) for n, p in model.named_parameters() if "lora_B" in n)


@pytest.mark.parametrize(("estimator", "in_reward"), [("k3", False), ("k2", False), ("k2", True)])
def test_kl_to_reference_model(estimator, in_reward):
    model = tiny_model(dtype=torch.float32)
    ref_model = copy.deepcopy(model).eval()
    trainer = config(kl_coef=0.5, kl_estimator=estimator, kl_in_reward=in_reward, minibatches_per_step=1)
    learner = Learner(model, trainer, pad_token_id=PAD, ref_model=ref_model)
    first = learner.update(make_samples())
    assert first["kl"] == pytest.approx(0.0, abs=1e-7)
    second = learner.update(make_samples())
    assert second["kl"] > 0
    # in the reward the penalty moves the advantages, so the loss has no KL term of its own
    assert (second["loss"] == pytest.approx(second["pg_loss"])) == in_reward


def test_kl_without_reference_is_a_clear_error():
    with pytest.raises(ValueError, match="reference"):
        Learner(tiny_model(), config(kl_coef=0.1), pad_token_id=PAD)


def test_unknown_loss_aggregation_is_rejected():
    with pytest.raises(ValueError, match="loss_agg"):
        Learner(tiny_model(), config(loss_agg="sum"), pad_token_id=PAD)


@pytest.mark.parametrize("minibatches", [1, 3])
def test_the_update_keeps_its_logprobs_under_the_sampling_weights_for_the_trajectory_log(minibatches):
    """`last_logprobs` holds every sample's log-probs of its sampled tokens under the weights before the update's
    first optimizer step, whether one optimizer step computes them inside the step or several compute them first."""
    model, samples = tiny_model(), make_samples(6)
    before = copy.deepcopy(model)
    learner = Learner(model, config(minibatches_per_step=minibatches, max_tokens_per_microbatch=40), pad_token_id=PAD)
    learner.update(samples)
    assert sorted(learner.last_logprobs) == list(range(len(samples)))
    with torch.no_grad():
        for i, sample in enumerate(samples):
            ids = torch.tensor(sample.token_ids)
            logits = before(ids[None]).logits[0, :-1].double()
            expected = torch.log_softmax(logits, -1).gather(-1, ids[1:, None])[:, 0]
            sampled = torch.tensor(sample.loss_mask[1:])  # what the log records; other positions are not scored
            torch.testing.assert_close(learner.last_logprobs[i].double()[sampled], expected[sampled])
