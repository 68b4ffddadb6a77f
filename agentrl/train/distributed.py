"""`DataParallel`: the ranks of a multi-process run and the few collectives the trainer needs.

A multi-process run (`agentrl train --nproc N`, or `accelerate launch -m agentrl train …` / `torchrun -m agentrl
train …` for those who launch that way) is data-parallel. Every rank holds the whole model, and a step goes:

- collect: the step's tasks are drawn the same way on every rank (one seed), and rank r runs its share of them
  (`shard`); every trajectory's sampling seed depends only on (run seed, step, task, sample), so which rank runs a
  trajectory does not change what it samples;
- score: each rank scores its own groups, then the scored groups are gathered in the tasks' order (`gather`), so
  every rank holds the whole batch: group filters, credit and batch statistics see exactly what one process sees;
- update: the samples are the same list on every rank; each mini-batch is split over the ranks (`shard` again),
  and every normaliser (the mini-batch's tokens and sequences) is counted on the whole mini-batch, which every rank
  holds, so each rank's loss is its exact share of the one-process loss. Summing the gradients over ranks
  (`sum_gradients`, an all-reduce) gives the one-process gradient, up to the order of float additions;
  clipping and AdamW then run on identical gradients, so the weights stay identical on every rank;
- evaluate, log, checkpoint: evaluation episodes are shared out and gathered like rollouts; only rank 0 writes
  (metrics, trajectories, checkpoints), and the ranks meet at a barrier after a checkpoint, so a kill never finds
  one rank a step ahead of the files. A checkpoint is the one-process checkpoint (weights and optimizer state are
  replicated, or gathered with trainer.sharding=fsdp), so a run resumes with any number of processes.

Gloo on the CPU, NCCL on GPUs. One process is `DataParallel.single()`, whose collectives are the identity.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class DataParallel:
    """This process's rank among `world_size` data-parallel processes."""

    rank: int = 0
    world_size: int = 1

    @classmethod
    def single(cls) -> DataParallel:
        return cls()

    @classmethod
    def from_environment(cls) -> DataParallel:
        """The process group the launcher (accelerate, torchrun) described in the environment, joined; one process
        when it described none."""
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return cls.single()
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            if backend == "nccl":
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            # CPU tensors reduce over gloo beside NCCL (FSDP's CPU offload clips gradients on the CPU); a rank may
            # wait for rank 0's whole collect in a collective (`--ray`), so the timeout is that of a long step
            dist.init_process_group(
                "cpu:gloo,cuda:nccl" if backend == "nccl" else backend, timeout=datetime.timedelta(hours=2)
            )
        return cls(dist.get_rank(), dist.get_world_size())

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes the run directory."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def shard(self, items: Sequence[T]) -> list[T]:
        """This rank's share of `items`: every world_size-th item from its rank (strided, so long and short items
        of a sorted list spread over the ranks)."""
        return list(items[self.rank :: self.world_size])

    def gather(self, mine: Sequence[T]) -> list[T]:
        """Every rank's `shard` output put back in the order of the list it was taken from (on every rank)."""
        if not self.enabled:
            return list(mine)
        import torch.distributed as dist

        parts: list[Any] = [None] * self.world_size
        dist.all_gather_object(parts, list(mine))
        out: list[T] = []
        for k in range(max(len(p) for p in parts)):
            out.extend(p[k] for p in parts if k < len(p))
        return out

    def share(self, value: T) -> T:
        """Rank 0's `value`, on every rank (a run directory named by the clock, say)."""
        if not self.enabled:
            return value
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def sum_floats(self, values: dict[str, float]) -> dict[str, float]:
        """`values` summed over the ranks (keys: the union, in rank 0's order first)."""
        if not self.enabled:
            return dict(values)
        import torch.distributed as dist

        parts: list[Any] = [None] * self.world_size
        dist.all_gather_object(parts, dict(values))
        out: dict[str, float] = {}
        for part in parts:
            for key, value in part.items():
                out[key] = out.get(key, 0.0) + value
        return out

    def max_int(self, value: int) -> int:
        """The largest of the ranks' `value`s, on every rank."""
        if not self.enabled:
            return value
        import torch.distributed as dist

        parts: list[Any] = [None] * self.world_size
        dist.all_gather_object(parts, int(value))
        return max(parts)

    def sum_gradients(self, params: Iterable[Any]) -> None:
        """Sum every parameter's gradient over the ranks, flattened into one buffer per dtype (one collective each);
        a parameter with no gradient on this rank (no sample reached it) counts as zeros."""
        if not self.enabled:
            return
        import torch
        import torch.distributed as dist

        by_dtype: dict[Any, list[Any]] = {}
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            by_dtype.setdefault(p.grad.dtype, []).append(p.grad)
        for grads in by_dtype.values():
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            offset = 0
            for g in grads:
                g.copy_(flat[offset : offset + g.numel()].view_as(g))
                offset += g.numel()

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
