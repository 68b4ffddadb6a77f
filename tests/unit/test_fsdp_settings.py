"""What `trainer.sharding` and `trainer.fsdp_cpu_offload` accept, and the idle micro-batch of a lockstepped rank."""

import dataclasses

import pytest
import torch

from agentrl.config import TrainerConfig
from agentrl.errors import ConfigError, DependencyError
from agentrl.train.fsdp import check_sharding, idle_sample
from agentrl.train.samples import TrainSample, collate

pytestmark = pytest.mark.unit


def settings(**fields) -> TrainerConfig:
    return dataclasses.replace(TrainerConfig(), **fields)


@pytest.mark.parametrize("sharding", [None, "none", "fsdp"])
def test_known_shardings_pass(sharding):
    check_sharding(settings(sharding=sharding), torch.nn.Linear(2, 2))


def test_an_unknown_sharding_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="trainer.sharding 'zero3'; known: none, fsdp"):
        check_sharding(settings(sharding="zero3"))


def test_cpu_offload_needs_fsdp():
    with pytest.raises(ConfigError, match="needs trainer.sharding=fsdp"):
        check_sharding(settings(fsdp_cpu_offload=True))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU machine may offload")
def test_cpu_offload_is_refused_without_a_gpu():
    with pytest.raises(ConfigError, match="needs a GPU"):
        check_sharding(settings(sharding="fsdp", fsdp_cpu_offload=True))


def test_lora_models_are_refused():
    adapted = torch.nn.Linear(2, 2)
    adapted.peft_config = {"default": object()}  # what peft (and transformers' adapter loading) set on a model
    with pytest.raises(ConfigError, match="LoRA"):
        check_sharding(settings(sharding="fsdp"), adapted)


@pytest.mark.parametrize("token_ids", [(5,), (5, 6, 7, 8)])
def test_the_idle_sample_is_two_tokens_with_one_masked_target(token_ids):
    sample = TrainSample(token_ids, (False,) * len(token_ids), (1.0,) * len(token_ids), (-1.0,) * len(token_ids))
    batch = collate([idle_sample(sample)], 0, torch.device("cpu"))
    assert batch.input_ids_B_T.shape == (1, 2)
    assert batch.mask_B_T1.tolist() == [[True]]  # the output embedding is reached, so its hooks fire too
    assert batch.advantages_B_T1.abs().sum() == 0


# --- what each torch version can shard ----------------------------------------------------------------------------


def without(monkeypatch, *names):
    from torch.distributed.fsdp import FSDPModule

    for name in names:
        if hasattr(FSDPModule, name):
            monkeypatch.delattr(FSDPModule, name)


def moe_model():
    model = torch.nn.Linear(2, 2)
    model.config = type("Config", (), {"num_experts": 8})()
    return model


def test_fsdp_runs_on_this_torch():
    from torch.distributed.fsdp import FSDPModule

    check_sharding(settings(sharding="fsdp"), torch.nn.Linear(2, 2))
    if hasattr(FSDPModule, "set_reduce_scatter_unused_params"):  # torch 2.13 reduces unused parameters too
        check_sharding(settings(sharding="fsdp"), moe_model())
    else:  # .venv-compat's torch 2.11
        with pytest.raises(DependencyError, match=r"torch >= 2\.13"):
            check_sharding(settings(sharding="fsdp"), moe_model())


def test_a_torch_whose_fsdp2_would_average_gradients_is_refused_in_one_line(monkeypatch):
    without(monkeypatch, "set_gradient_divide_factor")  # torch < 2.8
    with pytest.raises(DependencyError) as refused:
        check_sharding(settings(sharding="fsdp"), torch.nn.Linear(2, 2))
    assert "torch >= 2.8" in str(refused.value) and "\n" not in str(refused.value)
    check_sharding(settings(sharding="none"), torch.nn.Linear(2, 2))  # only fsdp needs it


def test_torch_2_8_to_2_12_shards_dense_models_and_refuses_expert_routing(monkeypatch):
    without(monkeypatch, "set_reduce_scatter_unused_params")  # torch 2.8 to 2.12
    check_sharding(settings(sharding="fsdp"), torch.nn.Linear(2, 2))
    with pytest.raises(DependencyError, match=r"torch >= 2\.13"):
        check_sharding(settings(sharding="fsdp"), moe_model())
