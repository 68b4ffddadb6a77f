"""`ShardedCopy`: the learner's FSDP2-sharded training copy of the policy (`trainer.sharding = fsdp`).

The trainer owns one unsharded model, and the in-process sampler generates through it: a sharded model cannot serve
generation, where each rank runs a different number of forwards and every forward of a sharded model is a
collective. So the learner trains a copy: `copy.deepcopy`, then `fully_shard` (FSDP2, Zhao et al. 2023, "PyTorch
FSDP") on every decoder layer and on the root, which splits parameters, gradients and AdamW state over the ranks.
After each update the full weights are gathered into the unsharded model in place (`write_back`, one parameter at a
time), so the sampler, weight sync and checkpoints read the new weights exactly as without sharding.

Memory per rank, for P parameters in fp32 trained by AdamW: 4·P bytes for the unsharded copy plus 16·P / N for the
shards (weights, gradients, two moments), against 16·P replicated; the copy is the price of sampling in-process.
While it computes, a rank also holds the whole weights of one decoder layer at a time and of the root (embeddings,
output layer, final norm).

Gradients: FSDP2 averages them over the ranks by default; here each rank's loss is its exact share of the
one-process loss (`distributed.py`), so they must be summed: a gradient divide factor of 1 with plain SUM reductions
(fp32 would otherwise reduce with PREMUL_SUM(1), which gloo lacks), and parameters a rank did not reach count as
zeros.

Checkpoints keep the one-process format: `full_optimizer_state` gathers the sharded AdamW state into an unsharded
AdamW's `state_dict()` (same integer keys, same tensors) and `load_optimizer_state` shards one back, so a run
resumes with any process count and either sharding.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from agentrl.errors import ConfigError, DependencyError
from agentrl.train.config import TrainerConfig
from agentrl.train.samples import TrainSample

SHARDINGS = ("none", "fsdp")


def check_sharding(config: TrainerConfig, model: torch.nn.Module | None = None) -> None:
    """Refuse a sharding this machine or `model` cannot run (ConfigError)."""
    if (config.sharding or "none") not in SHARDINGS:
        raise ConfigError(f"unknown trainer.sharding {config.sharding!r}; known: {', '.join(SHARDINGS)}")
    if config.sharding != "fsdp":
        if config.fsdp_cpu_offload:
            raise ConfigError("trainer.fsdp_cpu_offload needs trainer.sharding=fsdp")
        return
    check_fsdp_support(model)
    if config.fsdp_cpu_offload and not torch.cuda.is_available():
        raise ConfigError("trainer.fsdp_cpu_offload needs a GPU (the shards are offloaded from it): unset it here")
    if model is not None and hasattr(model, "peft_config"):
        raise ConfigError("trainer.sharding=fsdp does not train LoRA (peft) models: set trainer.sharding=none")


def check_fsdp_support(model: torch.nn.Module | None = None) -> None:
    """Refuse (`DependencyError`) a torch whose FSDP2 cannot sum gradients over ranks as this learner needs.

    `set_gradient_divide_factor` and `set_force_sum_reduction_for_comms` (torch 2.8) make the reduction a plain sum;
    without them FSDP2 averages, which would divide every gradient by the number of ranks. A model whose forward
    pass can skip parameters on one rank (mixture-of-experts routing) also needs `set_reduce_scatter_unused_params`
    (torch 2.13): otherwise the ranks' reduce-scatters differ; dense models reach every parameter on every rank
    (idle micro-batches included), so they train on torch 2.8 to 2.12 without it.
    """
    version = torch.__version__.split("+")[0]
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # torch < 2.6: FSDP2 was private
        FSDPModule = None  # noqa: N806
    summing = ("set_gradient_divide_factor", "set_force_sum_reduction_for_comms")
    if FSDPModule is None or not all(hasattr(FSDPModule, name) for name in summing):
        raise DependencyError(
            f"trainer.sharding=fsdp needs torch >= 2.8 (FSDP2 sum reductions); this is torch {version}: upgrade torch "
            "or set trainer.sharding=none"
        )
    if model is not None and _routes_experts(model) and not hasattr(FSDPModule, "set_reduce_scatter_unused_params"):
        raise DependencyError(
            f"trainer.sharding=fsdp of a mixture-of-experts model needs torch >= 2.13 (FSDP2 "
            f"set_reduce_scatter_unused_params); this is torch {version}: upgrade torch or set trainer.sharding=none"
        )


def _routes_experts(model: torch.nn.Module) -> bool:
    config = getattr(model, "config", None)
    config = getattr(config, "text_config", None) or config
    keys = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
    return any((getattr(config, key, 0) or 0) > 1 for key in keys)


def idle_sample(sample: TrainSample) -> TrainSample:
    """Two tokens of `sample`, the second under the loss mask: the cheapest pass that reaches every parameter (the
    output embedding included), for a rank that has run out of micro-batches while another has not."""
    return TrainSample((sample.token_ids * 2)[:2], (False, True), (0.0, 0.0), (0.0, 0.0))


class ShardedCopy:
    """`model`'s FSDP2-sharded copy (`.module`), trained in its place; `model` itself stays whole."""

    def __init__(
        self, model: torch.nn.Module, *, cpu_offload: bool = False, param_dtype: torch.dtype | None = None
    ) -> None:
        check_fsdp_support(model)
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

        _join_process_group()
        self.model = model
        self.module = copy.deepcopy(model)
        options: dict[str, Any] = {"offload_policy": CPUOffloadPolicy() if cpu_offload else OffloadPolicy()}
        if param_dtype is not None:  # shards stay fp32 (the masters), gathered for compute in param_dtype
            options["mp_policy"] = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
        for layer in _decoder_layers(self.module):
            fully_shard(layer, **options)
        fully_shard(self.module, **options)
        for sharded in self.module.modules():
            if hasattr(sharded, "_get_fsdp_state"):  # every FSDPModule: sum, never average (see the module docstring)
                sharded.set_gradient_divide_factor(1.0)
                sharded.set_force_sum_reduction_for_comms(True)
                if hasattr(sharded, "set_reduce_scatter_unused_params"):
                    sharded.set_reduce_scatter_unused_params(True, recurse=False)

    @torch.no_grad()
    def write_back(self) -> None:
        """Gather the trained weights into the unsharded model, in place, on every rank (a collective)."""
        self.module.reshard()  # a no-grad forward leaves the root's parameters unsharded
        whole = dict(self.model.named_parameters())
        for name, param in self.module.named_parameters():
            if param.requires_grad:
                whole[name].copy_(_gathered(param))

    @torch.no_grad()
    def reload(self, weights: dict[str, torch.Tensor] | None = None) -> None:
        """Re-read every shard from `weights` (fp32 masters by name, a checkpoint's), else from the unsharded model
        (after a checkpoint was loaded into it); each rank takes its own slice, no communication."""
        self.module.reshard()
        whole = {name: p.detach() for name, p in self.model.named_parameters()} | dict(weights or {})
        for name, param in self.module.named_parameters():
            param.to_local().copy_(_slice_like(whole[name], param).to_local())

    def full_parameters(self, *, keep: bool) -> dict[str, torch.Tensor]:
        """The trainable parameters' full (fp32 master) values by name, gathered (a collective: every rank calls
        it); kept, on the CPU, only where `keep`, else an empty dict."""
        self.module.reshard()
        out = {}
        for name, param in self.module.named_parameters():
            if param.requires_grad:
                gathered = _gathered(param)
                if keep:
                    out[name] = gathered.cpu()
        return out

    def full_optimizer_state(self, optimizer: torch.optim.Optimizer, *, keep: bool) -> dict[str, Any]:
        """An unsharded AdamW's `state_dict()` for `optimizer` (a collective: every rank calls it); the gathered
        tensors are kept, on the CPU, only where `keep` (rank 0, which writes the checkpoint), else None."""
        sharded = optimizer.state_dict()
        state: dict[int, dict[str, Any]] = {}
        for index, entry in sharded["state"].items():
            state[index] = {}
            for key, value in entry.items():
                if _is_dtensor(value):
                    gathered = _gathered(value)  # every rank takes part in the gather
                    value = gathered.cpu() if keep else None
                state[index][key] = value
        return {"state": state, "param_groups": sharded["param_groups"]}

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, full: dict[str, Any]) -> None:
        """Load an unsharded AdamW's `state_dict()` into `optimizer`, each rank keeping its slice of every moment."""
        params = [p for group in optimizer.param_groups for p in group["params"]]
        state: dict[int, dict[str, Any]] = {}
        for index, entry in full["state"].items():
            param = params[int(index)]
            state[index] = {
                key: _slice_like(value, param) if _is_moment(value, param) else value for key, value in entry.items()
            }
        optimizer.load_state_dict({"state": state, "param_groups": full["param_groups"]})


def _join_process_group() -> None:
    # A one-process run has no process group; FSDP2 needs one, so it gets a group of one, in memory. On a GPU it
    # also gets gloo for CPU tensors: CPU-offloaded shards reduce their gradient norms on the CPU.
    import atexit

    import torch.distributed as dist

    if not dist.is_initialized():
        backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
        atexit.register(lambda: dist.destroy_process_group() if dist.is_initialized() else None)


def _decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules that are each sharded (and gathered) as one unit: the classes transformers keeps whole
    (`_no_split_modules`, the decoder layers), else the items of the model's longest `ModuleList`."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if layers:
        return layers
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    return list(max(lists, key=len)) if lists else []


def _is_dtensor(value: Any) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(value, DTensor)


def _is_moment(value: Any, param: torch.Tensor) -> bool:
    """An optimizer state tensor shaped like its parameter (AdamW's moments; not its step count)."""
    return isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape == param.shape


def _gathered(dtensor: Any) -> torch.Tensor:
    """The whole tensor, on every rank; CPU-offloaded shards are gathered on the device of the process group."""
    if dtensor.device.type != dtensor.device_mesh.device_type:
        dtensor = dtensor.to(dtensor.device_mesh.device_type)
    return dtensor.full_tensor()


def _slice_like(whole: torch.Tensor, like: Any) -> Any:
    """This rank's slice of `whole`, laid out as the sharded tensor `like` (every rank holds `whole`)."""
    from torch.distributed.tensor import distribute_tensor

    mesh = like.device_mesh
    whole = whole.to(device=mesh.device_type, dtype=like.dtype)
    return distribute_tensor(whole, mesh, like.placements, src_data_rank=None).to(like.device)
