"""Chunked log-probabilities and entropies equal the one-pass computation, values and gradients.

Tolerances: float64 inputs agree to rtol 1e-10 / atol 1e-12 (only the order of float additions differs), float32
ones to rtol 1e-5 / atol 1e-6.
"""

import dataclasses

import pytest
import torch
from transformers import Gemma2Config, Gemma2ForCausalLM, Qwen2Config, Qwen2ForCausalLM

from agentrl.errors import ConfigError
from agentrl.train.chunked_logprobs import chunked_logprobs_N, scaled_logits
from agentrl.train.forward import forward_logprobs_B_T1
from agentrl.train.losses import entropy_from_logits, token_logprobs
from agentrl.train.samples import TrainSample, collate

pytestmark = pytest.mark.unit

TOLERANCE = {torch.float64: {"rtol": 1e-10, "atol": 1e-12}, torch.float32: {"rtol": 1e-5, "atol": 1e-6}}


def one_pass_N(hidden_N_H, targets_N, project, temperature):
    logits_N_V = scaled_logits(project(hidden_N_H), temperature)
    return token_logprobs(logits_N_V, targets_N), entropy_from_logits(logits_N_V)


def values_and_grads(fn, hidden_N_H, project, weights_N, objective="both"):
    """Outputs of fn(hidden), and the gradients of Σ w·(logprob + entropy), or of one of the two alone, w.r.t. the
    hidden states and the projection."""
    hidden_N_H = hidden_N_H.detach().clone().requires_grad_(True)
    project.zero_grad(set_to_none=True)
    logprobs_N, entropy_N = fn(hidden_N_H)
    terms = {"both": logprobs_N + 0.3 * entropy_N, "logprobs": logprobs_N, "entropy": entropy_N}
    (weights_N * terms[objective]).sum().backward()
    grads = [hidden_N_H.grad] + [p.grad for p in project.parameters()]
    return [logprobs_N.detach(), entropy_N.detach()], grads


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("n", "chunk", "temperature"), [(23, 5, 0.7), (23, 23, 1.0), (23, 100, 1.3), (24, 8, 1.0)])
def test_chunks_equal_one_pass_in_values_and_gradients(dtype, n, chunk, temperature):
    torch.manual_seed(0)
    project = torch.nn.Linear(16, 50, bias=True).to(dtype)  # a bias: the chunks must not fold the temperature in
    hidden_N_H = torch.randn(n, 16, dtype=dtype) * 3
    targets_N = torch.randint(0, 50, (n,))
    weights_N = torch.randn(n, dtype=dtype)
    expected = values_and_grads(
        lambda h: one_pass_N(h, targets_N, project, temperature), hidden_N_H, project, weights_N
    )
    chunked = values_and_grads(
        lambda h: chunked_logprobs_N(
            h, targets_N, project, chunk_tokens=chunk, temperature=temperature, entropy="grad"
        ),
        hidden_N_H,
        project,
        weights_N,
    )
    for got, want in zip(chunked[0] + chunked[1], expected[0] + expected[1], strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE[dtype])


@pytest.mark.parametrize("objective", ["logprobs", "entropy"])
def test_gradients_of_either_output_alone(objective):
    torch.manual_seed(2)
    project = torch.nn.Linear(16, 50, bias=False).double()
    hidden_N_H = torch.randn(13, 16, dtype=torch.float64) * 3
    targets_N = torch.randint(0, 50, (13,))
    weights_N = torch.randn(13, dtype=torch.float64)
    expected = values_and_grads(
        lambda h: one_pass_N(h, targets_N, project, 1.0), hidden_N_H, project, weights_N, objective
    )
    chunked = values_and_grads(
        lambda h: chunked_logprobs_N(h, targets_N, project, chunk_tokens=4, entropy="grad"),
        hidden_N_H,
        project,
        weights_N,
        objective,
    )
    for got, want in zip(chunked[1], expected[1], strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE[torch.float64])


def test_entropy_value_mode_keeps_no_graph_and_leaves_the_logprob_gradient_alone():
    torch.manual_seed(1)
    project = torch.nn.Linear(8, 30, bias=False).double()
    hidden_N_H = torch.randn(11, 8, dtype=torch.float64, requires_grad=True)
    targets_N = torch.randint(0, 30, (11,))
    logprobs_N, entropy_N = chunked_logprobs_N(hidden_N_H, targets_N, project, chunk_tokens=4, entropy="value")
    assert entropy_N is not None and entropy_N.grad_fn is None and logprobs_N.grad_fn is not None
    logprobs_N.sum().backward()
    reference_N_H = hidden_N_H.detach().clone().requires_grad_(True)
    token_logprobs(project(reference_N_H), targets_N).sum().backward()
    torch.testing.assert_close(hidden_N_H.grad, reference_N_H.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(entropy_N, entropy_from_logits(project(hidden_N_H)).detach(), rtol=1e-10, atol=1e-12)
    assert chunked_logprobs_N(hidden_N_H, targets_N, project, chunk_tokens=4)[1] is None


def test_no_positions_still_give_a_graph():
    project = torch.nn.Linear(8, 30)
    logprobs_N, _ = chunked_logprobs_N(torch.zeros(0, 8), torch.zeros(0, dtype=torch.long), project, chunk_tokens=4)
    assert logprobs_N.shape == (0,)
    logprobs_N.sum().backward()
    assert torch.equal(project.weight.grad, torch.zeros_like(project.weight))


def tiny_qwen(lm_head_lora: bool):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=40,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    )
    targets = ["q_proj", "v_proj"] + (["lm_head"] if lm_head_lora else [])
    # init_lora_weights=False: random lora_B, so the adapters change the logits the test compares
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=targets, init_lora_weights=False)
    return get_peft_model(Qwen2ForCausalLM(config).double(), lora)


def batch_of(lengths, vocab=40, seed=0):
    rng = torch.Generator().manual_seed(seed)
    samples = []
    for length in lengths:
        mask = [False] * 2 + [True] * (length - 2)
        mask[length // 2] = False  # a masked span inside the sequence
        samples.append(
            TrainSample(
                token_ids=tuple(torch.randint(1, vocab, (length,), generator=rng).tolist()),
                loss_mask=tuple(mask),
                advantages=(0.0,) * length,
                sampler_logprobs=(0.0,) * length,
            )
        )
    return collate(samples, pad_token_id=0, device=torch.device("cpu"))


@pytest.mark.parametrize("lm_head_lora", [False, True])
def test_lora_model_chunked_equals_one_pass(lm_head_lora):
    model = tiny_qwen(lm_head_lora)
    batch = batch_of([9, 6, 7])
    mask_B_T1 = batch.mask_B_T1
    weights_B_T1 = torch.randn(mask_B_T1.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    results = []
    for chunk in (0, 4):
        model.zero_grad(set_to_none=True)
        logprobs_B_T1, entropy_B_T1 = forward_logprobs_B_T1(
            model, batch, temperature=0.8, chunk_tokens=chunk, entropy="grad"
        )
        loss = torch.where(mask_B_T1, weights_B_T1 * (logprobs_B_T1 - 0.5 * entropy_B_T1), 0.0).sum()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        results.append((logprobs_B_T1[mask_B_T1], entropy_B_T1[mask_B_T1], grads))
    (lp0, h0, g0), (lp1, h1, g1) = results
    assert any("lm_head" in name for name in g0) == lm_head_lora
    torch.testing.assert_close(lp1, lp0, **TOLERANCE[torch.float64])
    torch.testing.assert_close(h1, h0, **TOLERANCE[torch.float64])
    assert g0.keys() == g1.keys() and all(g.abs().sum() > 0 for g in g0.values())
    for name in g0:
        torch.testing.assert_close(g1[name], g0[name], **TOLERANCE[torch.float64], msg=name)
    with model.disable_adapter(), torch.no_grad():  # the adapters matter, so the comparison above saw them
        base_B_T1, _ = forward_logprobs_B_T1(model, batch, temperature=0.8, chunk_tokens=4)
    assert not torch.allclose(base_B_T1[mask_B_T1], lp0)


def test_a_model_whose_logits_are_not_its_output_embedding_is_refused_when_chunked():
    torch.manual_seed(0)
    config = Gemma2Config(
        vocab_size=40,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        final_logit_softcapping=0.05,
    )
    model = Gemma2ForCausalLM(config)
    batch = batch_of([6, 5])
    with pytest.raises(ConfigError, match="logprob_chunk_tokens=0"):
        forward_logprobs_B_T1(model, batch, chunk_tokens=4)
    forward_logprobs_B_T1(model, batch, chunk_tokens=0)  # the one-pass path applies the cap
    # without soft-capping, the same architecture passes the check
    plain = Gemma2ForCausalLM(dataclasses.replace(config, final_logit_softcapping=None))
    forward_logprobs_B_T1(plain, batch, chunk_tokens=4)
