"""Time `Learner.update` on the CPU and count what the GPU pays for: host reads per update and aten ops per optimizer
step. Runs against whichever agentrl is importable, so two checkouts can be compared side by side.

    python scripts/learner_update_speed.py tiny     # the shipped tiny policy (Qwen2, 1.3M parameters)
    python scripts/learner_update_speed.py qwen3    # a random Qwen3 of agentrl.testing.families (hidden 256, 4 layers)

32 samples of 100 to 900 tokens (a quarter to a half prompt, then 80% policy tokens), the default TrainerConfig
(4 mini-batches: a π_old pass and 4 optimizer steps); one untimed update, then the median of 3 (wall and process
CPU time, which a loaded machine distorts less). Prints one JSON line.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from agentrl.config import TrainerConfig
from agentrl.train.learner import Learner
from agentrl.train.samples import TrainSample

HOST_READS = ("item", "tolist", "cpu", "__bool__", "__float__", "__int__")


def samples_for(vocab: int, n: int, shortest: int, longest: int, seed: int = 0) -> list[TrainSample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.randint(shortest, longest)
        prompt = rng.randint(shortest // 4, shortest // 2)
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


def model_for(name: str) -> tuple[torch.nn.Module, int]:
    if name == "tiny":
        from agentrl.config import PolicyConfig
        from agentrl.policy import load_model_and_tokenizer

        model, tokenizer = load_model_and_tokenizer(PolicyConfig(model="tiny", device="cpu"))
    else:
        from agentrl.testing.families import family_model

        model, tokenizer = family_model("qwen3", hidden_size=256, layers=4)
    return model, tokenizer.pad_token_id


class AtenOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.count += 1
        return func(*args, **(kwargs or {}))


def host_reads(fn) -> int:  # noqa: ANN001
    saved = {name: getattr(torch.Tensor, name) for name in HOST_READS}
    count = [0]

    def counting(original):  # noqa: ANN001
        def read(tensor, *args, **kwargs):  # noqa: ANN001
            count[0] += 1
            return original(tensor, *args, **kwargs)

        return read

    for name, original in saved.items():
        setattr(torch.Tensor, name, counting(original))
    try:
        fn()
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)
    return count[0]


def main(name: str) -> dict:
    torch.set_num_threads(2)
    model, pad = model_for(name)
    samples = samples_for(model.config.vocab_size, 32, 100, 900)
    learner = Learner(model, TrainerConfig(lr=1e-5), pad_token_id=pad)
    learner.update(samples)
    wall, cpu = [], []
    for _ in range(3):
        started, cpu_started = time.perf_counter(), time.process_time()
        metrics = learner.update(samples)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    reads = host_reads(lambda: learner.update(samples))
    one_step = Learner(model, TrainerConfig(lr=1e-5, minibatches_per_step=1), pad_token_id=pad)
    one_step.update(samples[:8])
    with AtenOps() as ops:
        one_step.update(samples[:8])
    return {
        "model": name,
        "parameters": sum(p.numel() for p in model.parameters()),
        "tokens": sum(len(s.token_ids) for s in samples),
        "update_s": round(statistics.median(wall), 3),
        "update_cpu_s": round(statistics.median(cpu), 3),
        "microbatches": metrics["microbatches"],
        "host_reads_per_update": reads,
        "aten_ops_one_step_8_samples": ops.count,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "tiny")))
