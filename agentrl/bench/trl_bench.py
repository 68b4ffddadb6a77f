"""`agentrl bench trl`: agentrl's trainer and TRL's `GRPOTrainer` on the same tool-calling workload, side by side.

What runs: the shipped tiny policy learns the code scaffold's arithmetic tasks with its `calculate` tool, twice
from the same checkpoint (one copy per side, both loaded by `agentrl.policy.loading`, so from the same local
path): once with agentrl's `Trainer`, once with TRL's `GRPOTrainer`, which runs its own tool-calling loop over the
same Python function (`tools=[calculate.fn]`). Both train in one process and their steps alternate (TRL's step,
then agentrl's, driven by a TRL callback), so whatever else loads the machine falls on both.

Equal on both sides:
- the prompts: each step's tasks are those agentrl's trainer draws for that step; TRL's dataset lists them in step
  order, unshuffled, and its reward function checks that each generation batch holds exactly that step's tasks;
  both render them with the checkpoint's own chat template (system prompt and question);
- the group size, the prompts per step, and the optimizer steps per step: agentrl splits a step's batch into
  `trainer.minibatches_per_step` mini-batches; TRL generates once per `steps_per_generation` optimizer steps of
  `per_device_train_batch_size` = the batch / that count, so one step of either side is one generation batch and
  the same number of AdamW steps over it;
- the token limits: at most `max_new_tokens_per_turn` sampled tokens a turn (TRL: `generation_kwargs`) and at most
  `max_tool_rounds` tool rounds (agentrl: `rollout.max_turns` = rounds + 1; TRL: `max_tool_calling_iterations`);
- the optimisation: learning rate, AdamW betas (agentrl's), no weight decay, a constant schedule, gradient-norm
  clipping at 1, the clip range (agentrl's 0.2 / 0.28; TRL `epsilon` / `epsilon_high`), no KL term, temperature 1;
- the reward: agentrl's `exact_match` on the final answer. TRL's answer is the last message when it is an
  assistant message without tool calls; otherwise the episode has no answer and scores 0, as in agentrl.

Left at each side's own behaviour: agentrl drops groups whose rewards are all equal before the update
(`trainer.skip_zero_advantage_groups`), TRL computes their zero-advantage loss; agentrl answers a malformed tool
call with a correction and lets the model retry (`rollout.max_parse_errors`), TRL takes it as the answer; TRL's
`max_completion_length` (tool responses included) and agentrl's `rollout.max_tokens_per_episode` are both far above
what 4 turns of 64 tokens reach, so neither binds. agentrl samples through its continuous-batching sampler and
calls the tool through its tool server (in process); TRL calls `model.generate` once per tool round on the rows
still calling tools, and the function directly.

Timing: per step, wall seconds (`time.perf_counter`) and the process's CPU seconds (`time.process_time`, all
threads), from the end of one side's step to the end of its next. The first step of each side warms caches, the
tool server and the data loader: it is listed but left out of the medians.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.bench.trl_bench_report import SideRecord, summarize


@dataclass(frozen=True)
class TrlBenchConfig:
    """The workload both sides train on."""

    steps: int = 8
    """Training steps of each side (one generation batch each)."""
    prompts_per_step: int = 8
    """Tasks per step."""
    samples_per_prompt: int = 4
    """Trajectories per task (the group size)."""
    max_new_tokens_per_turn: int = 64
    """Tokens the policy may sample in one turn."""
    max_tool_rounds: int = 3
    """Tool rounds an episode may take before its last turn."""
    lr: float = 2e-4
    """Learning rate of both sides (agentrl's default)."""
    minibatches_per_step: int = 4
    """Optimizer steps per step (agentrl's default `trainer.minibatches_per_step`)."""
    seed: int = 0
    """Seed of both sides (task draws, sampling, initialisation of anything random)."""
    model: str = "tiny"
    """Checkpoint both sides load (`policy.model`)."""
    device: str = "cpu"
    """Torch device of both sides."""
    torch_threads: int = 0
    """Intra-op threads of torch in this process, so of both sides (0: torch's default, one per core)."""
    agentrl_overrides: tuple[str, ...] = ()
    """Extra `key=value` settings of agentrl's run (e.g. `policy.batch_wait_ms=0`)."""


class StepClock:
    """Wall and process-CPU seconds since the last `restart`."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self._wall, time.process_time() - self._cpu


def step_tasks(train_tasks: Sequence[Any], seed: int, step: int, n: int) -> list[Any]:
    """The tasks agentrl's `Trainer.collect` draws for `step` (checked against what it collected)."""
    rng = random.Random(f"{seed}/{step}")
    return rng.sample(list(train_tasks), min(n, len(train_tasks)))


def run_benchmark(config: TrlBenchConfig = TrlBenchConfig()) -> dict[str, Any]:
    """Train both sides `config.steps` steps, alternating; JSON-ready per-step figures, medians and ratios."""
    with _torch_threads(config.torch_threads), tempfile.TemporaryDirectory(prefix="agentrl-bench-trl-") as scratch:
        agentrl_side = AgentrlSide(config, os.path.join(scratch, "agentrl"))
        try:
            trainer = agentrl_side.trainer
            steps = range(1, config.steps + 1)
            plan = [step_tasks(trainer.train_tasks, config.seed, s, config.prompts_per_step) for s in steps]
            records = {"agentrl": SideRecord(), "trl": SideRecord()}
            messages = trainer.scaffold.initial_messages  # what agentrl renders, so TRL renders the same
            trl_dir = os.path.join(scratch, "trl")
            trl_side = build_trl_trainer(config, plan, messages, trl_dir, records, agentrl_side.step)
            machine = _machine()
            with contextlib.redirect_stdout(sys.stderr):  # TRL and transformers print; stdout carries the result
                trl_side.train()
            machine["load_avg_1m_before_after"].append(round(os.getloadavg()[0], 2))
        finally:
            agentrl_side.close()
    for step, tasks in enumerate(plan, start=1):
        if agentrl_side.collected.get(step) != Counter(t.id for t in tasks):
            raise RuntimeError(f"agentrl collected other tasks at step {step} than planned: the runs do not compare")
    return summarize(config, records, machine)


@contextlib.contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads of this thread set to `threads` inside (0: left as they are)."""
    import torch

    before = torch.get_num_threads()
    if threads > 0:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class AgentrlSide:
    """agentrl's `Trainer` on the workload, one `train_step` at a time."""

    def __init__(self, config: TrlBenchConfig, run_dir: str) -> None:
        from agentrl.trainer import Trainer

        overrides = [
            "scaffold=code",
            f"seed={config.seed}",
            f"policy.model={config.model}",
            f"policy.device={config.device}",
            f"rollout.prompts_per_step={config.prompts_per_step}",
            f"rollout.samples_per_prompt={config.samples_per_prompt}",
            f"rollout.max_new_tokens_per_turn={config.max_new_tokens_per_turn}",
            f"rollout.max_turns={config.max_tool_rounds + 1}",
            f"trainer.lr={config.lr}",
            f"trainer.minibatches_per_step={config.minibatches_per_step}",
            # one step more than run, so the last step is not a final step (no checkpoint, no evaluation)
            f"trainer.steps={config.steps + 1}",
            f"checkpoint_every_steps={config.steps + 1}",
            "eval.every_steps=0",
            "progress=false",
            "tensorboard=false",
            *config.agentrl_overrides,
        ]
        collected = self.collected = {}

        class RecordingTrainer(Trainer):
            def collect(self, step: int, *args: Any, **kwargs: Any) -> Any:
                groups, stats = super().collect(step, *args, **kwargs)
                collected[step] = Counter(g.task.id for g in groups)
                return groups, stats

        self.trainer = RecordingTrainer(overrides, run_dir)
        self.started = time.monotonic()

    def step(self, step: int) -> dict[str, float]:
        from agentrl.runlog.progress import TrainProgress

        with TrainProgress(self.trainer.config.trainer.steps, enabled=False) as progress:
            stats, _ = self.trainer.train_step(step, self.started, progress)
        return stats

    def close(self) -> None:
        self.trainer.close()


def build_trl_trainer(
    config: TrlBenchConfig,
    plan: list[list[Any]],
    messages: Callable[[Any], list[dict[str, Any]]],
    output_dir: str,
    records: dict[str, SideRecord],
    agentrl_step: Callable[[int], dict[str, float]],
) -> Any:
    """TRL's `GRPOTrainer` over the planned tasks (rendered to chat messages by `messages`, agentrl's scaffold's
    `initial_messages`), with a callback that ends each of its steps by timing it and
    running agentrl's step of the same number."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    from agentrl.config import TrainerConfig
    from agentrl.policy.config import PolicyConfig
    from agentrl.policy.loading import load_model_and_tokenizer
    from agentrl.rewards.outcome import exact_match
    from agentrl.scaffolds.code.tools import calculate

    model, tokenizer = load_model_and_tokenizer(PolicyConfig(model=config.model, device=config.device))
    # the tiny template is Qwen2.5's without tool schemas, which trl does not recognise; Qwen2.5's parser reads it
    tokenizer.response_template = qwen3_template
    defaults = TrainerConfig()
    rows = [{"prompt": messages(t), "task_id": t.id} for tasks in plan for t in tasks]
    by_id = {t.id: t for tasks in plan for t in tasks}
    batch = config.prompts_per_step * config.samples_per_prompt
    if batch % config.minibatches_per_step:
        raise ValueError("prompts_per_step × samples_per_prompt must divide into minibatches_per_step")
    args = GRPOConfig(
        output_dir=output_dir,
        seed=config.seed,
        use_cpu=config.device == "cpu",
        per_device_train_batch_size=batch // config.minibatches_per_step,
        steps_per_generation=config.minibatches_per_step,
        num_generations=config.samples_per_prompt,
        max_steps=config.steps * config.minibatches_per_step,
        max_completion_length=1024,
        generation_kwargs={"max_new_tokens": config.max_new_tokens_per_turn},
        max_tool_calling_iterations=config.max_tool_rounds,
        learning_rate=config.lr,
        lr_scheduler_type="constant",
        adam_beta1=defaults.betas[0],
        adam_beta2=defaults.betas[1],
        weight_decay=defaults.weight_decay,
        max_grad_norm=defaults.max_grad_norm,
        epsilon=defaults.clip_low,
        epsilon_high=defaults.clip_high,
        beta=0.0,
        temperature=1.0,
        shuffle_dataset=False,
        logging_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        bf16=False,
    )
    trl_record, agentrl_record = records["trl"], records["agentrl"]

    def exact_match_reward(prompts: list, completions: list, task_id: list, **_: Any) -> list[float]:
        step = len(trl_record.reward) + 1
        expected = Counter({t.id: config.samples_per_prompt for t in plan[step - 1]})
        if Counter(task_id) != expected:
            raise RuntimeError(f"TRL's generation batch {step} holds other tasks than agentrl's step {step}")
        rewards = [float(exact_match.fn(by_id[i], _final_answer(c))) for c, i in zip(completions, task_id, strict=True)]
        trl_record.reward.append(sum(rewards) / len(rewards))
        return rewards

    class Alternate(TrainerCallback):
        """Ends TRL's step k (its last optimizer step of generation batch k) and runs agentrl's step k."""

        def on_train_begin(self, *_: Any, **__: Any) -> None:
            self.clock = StepClock()

        def on_step_end(self, _args: Any, state: Any, *_: Any, **__: Any) -> None:
            if state.global_step % config.minibatches_per_step:
                return
            _append_times(trl_record, self.clock.read())
            step = state.global_step // config.minibatches_per_step
            clock = StepClock()
            stats = agentrl_step(step)
            _append_times(agentrl_record, clock.read())
            agentrl_record.reward.append(stats.get("reward/mean", float("nan")))
            for key in ("time/collect_s", "time/score_s", "time/update_s", "time/step_s"):
                # a step whose groups all tie skips its update: that phase took no time
                agentrl_record.phases.setdefault(key, []).append(stats.get(key, 0.0))
            self.clock.restart()

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[exact_match_reward],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        tools=[calculate.fn],
        callbacks=[Alternate()],
    )
    _time_generation(trainer, trl_record)
    return trainer


def _time_generation(trainer: Any, record: SideRecord) -> None:
    """Record the seconds of TRL's generation phase (sampling, tool calls, rewards, old log-probs) per step, from
    its (private) method when this TRL version has it."""
    generate = getattr(trainer, "_generate_and_score_completions", None)
    if generate is None:
        return

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return generate(*args, **kwargs)
        finally:
            record.phases.setdefault("generate_and_score_s", []).append(time.perf_counter() - start)

    trainer._generate_and_score_completions = timed


def _final_answer(completion: list[dict[str, Any]]) -> str | None:
    last = completion[-1] if completion else {}
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return None
    return last.get("content") or ""


def _append_times(record: SideRecord, times: tuple[float, float]) -> None:
    record.wall_s.append(times[0])
    record.cpu_s.append(times[1])


def _machine() -> dict[str, Any]:
    """What the figures depend on: cores, torch's threads, the load other processes put on the machine."""
    import torch
    import transformers
    import trl

    return {
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_avg_1m_before_after": [round(os.getloadavg()[0], 2)],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }
