"""Rebuild the bundled tiny policies (`agentrl/tiny/policy/`, `agentrl/tiny/policy_extended/`), in three stages.

    python -m agentrl.tiny.build                    # all three stages
    python -m agentrl.tiny.build --stages base      # `tiny` alone, about 23 minutes on 2 CPU cores
    python -m agentrl.tiny.build --stages copy,extend --init agentrl/tiny/policy --out /tmp/p
    python -m agentrl.tiny.build --keep /tmp/stages  # also keep each stage's checkpoint
    python -m agentrl.tiny.build --stages extend --extend-passes swe+retry \\
        --init agentrl/tiny/policy_extended --out /tmp/swe                    # `tiny-swe`, about 70 minutes

The base stage writes `tiny` (`agentrl/tiny/policy/`), the extend stage `tiny-extended`
(`agentrl/tiny/policy_extended/`); `--out` sends the last stage run elsewhere instead. On 2 CPU cores expect
about an hour for the extend stage (two passes) and up to an hour for the copy stage (up to 7,200 steps of 16
short drills, about 0.5 s a step).

The shipped `tiny-extended` was extended from a copy-stage checkpoint trained on the same drill distributions
(lead-in drills, then dense ones, base demonstrations replayed) by a plain PyTorch loop, not by this copy stage;
whether a full three-stage run reproduces the shipped `tiny-extended` has not been checked. `--stages extend
--init CHECKPOINT` runs the extend stage alone.

1. `base`: demonstrations from the imperfect scripted experts on the TRAIN tasks of the code and search
   scaffolds → a byte-level BPE trained on their rendered text → a freshly initialised tiny Qwen2 → SFT. The
   tokenizer is fixed from here on.
2. `copy`: echo drills (`agentrl/tiny/build/copy_drills.py`: the assistant repeats each user message) with base
   demonstrations replayed alongside, at a constant learning rate: `COPY_WARM_STEPS` of single-round drills
   behind a lead-in, then dense multi-round drills until the loss falls below `COPY_STOP_LOSS`.
   The later scaffolds' easy tiers are copying (a name, a label, a path, an expression goes from the prompt
   into a tool call); fine-tuned on their demonstrations alone, the base policy recalls the strings it saw and
   garbles held-out ones. The drills form the circuit that copies strings it never saw; the loss drops sharply
   when it forms.
3. `extend`: demonstrations of the terminal scaffold's easy tier over made-up names
   (`easy_family.made_up`), and synthetic drills in the exact format of GUI and SWE easy-tier episodes
   (`gui_drills.py`, `swe_drills.py`; no bundled task is among them), with echo drills and
   base demonstrations replayed alongside, in the passes `EXTEND_PASSES`: one over all three, then one weighted
   towards the GUI drills. `--extend-passes swe --init agentrl/tiny/policy_extended` continues with the passes
   weighted towards the SWE drills (`SWE_PASSES`), and `--extend-passes swe_retry` from that result with one
   whose drills retry after a failed first edit (`SWE_RETRY_PASSES`); `tiny-extended` includes neither. The
   shipped `tiny-swe` (`agentrl/tiny/policy_swe/`) is `--extend-passes swe+retry --init
   agentrl/tiny/policy_extended`: one run (about 70 minutes on 2 CPU cores) writes its weights byte for byte.
   `--extend-passes swe_code --init agentrl/tiny/policy_swe` continues with drills over bugs in the standard
   library's code (`agentrl/tiny/build/swe_code_drills.py`, `SWE_CODE_PASSES`), which have the expression forms
   the drill grammar lacks; its data depends on the Python version's standard library.
   `--single-punctuation` makes the extend stage's tokenizer pre-tokenize one punctuation mark at a time
   (`agentrl.tiny.tokenizer.SINGLE_PUNCTUATION_PATTERN`, same vocabulary): with `--extend-passes swe+retry` it
   rebuilds `tiny-swe` so that every easy fix is the issue's tokens in the call (about 70 minutes).
   `--extend-passes opening` continues a `swe+retry` checkpoint with 30 steps of SWE drills alone
   (`SWE_OPENING_PASSES`, a few minutes), which settle its first call on `str_replace`. What these variants do:
   docs/experiments/swe_tiny_policy.md.

The conversations come from `data.py`, the extend stage's passes from `passes.py`. Every source of randomness is
seeded and the thread count is fixed, so the same versions of torch/transformers/trl on the same kind of machine
give the same files. The weights are stored in bf16 and load as fp32.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agentrl.tiny.build.data import (
    BASE_SOURCES,
    MISTAKE_RATE,
    base_scaffolds,
    demonstrations,
    echo_drills,
    mixture,
    replay,
)
from agentrl.tiny.build.passes import EXTEND_PASSES, PASS_SETS, Pass
from agentrl.tiny.tokenizer import TOOLLESS_TEMPLATE_PREFIX, split_punctuation

THREADS = 2
SEED = 0
VOCAB_SIZE = 2560
HIDDEN_SIZE = 128
NUM_LAYERS = 4
SFT_EPOCHS = 1.25
SFT_LR = 3e-3
SFT_BATCH_SIZE = 16
COPY_LR = 2e-3
COPY_WARM_STEPS = 4800
"""Steps of single-round lead-in drills (3 per replayed base demonstration) that open the copy stage."""
COPY_MAX_STEPS = 2400
COPY_STOP_LOSS = 0.15
"""The dense part of the copy stage ends when its training loss (echo drills and replayed base demonstrations,
averaged over 50 steps) falls below this, or after `COPY_MAX_STEPS`."""
COPY_REPLAY = 1 / 3
"""Base demonstrations replayed in the copy stage, per echo drill."""


STAGES = ("base", "copy", "extend")


def make_deterministic(seed: int) -> None:
    import datasets
    import torch

    datasets.disable_progress_bars()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(THREADS)
    torch.use_deterministic_algorithms(True)
    # filling every fresh tensor with NaN only detects reads of uninitialised memory, and trl's chunked loss
    # allocates a large scratch buffer per step
    torch.utils.deterministic.fill_uninitialized_memory = False


def save_policy(model: Any, tokenizer: Any, out_dir: Path) -> None:
    """Write the checkpoint: bf16 weights (half the bytes) under a config that loads them as fp32."""
    import torch

    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.iterdir():
        if stale.is_file():
            stale.unlink()
    model.to(torch.bfloat16)
    model.config.use_cache = True
    model.save_pretrained(out_dir)
    model.to(torch.float32)
    config = json.loads((out_dir / "config.json").read_text())
    config["dtype"] = "float32"
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(out_dir)


def heldout_report(out_dir: Path) -> dict[str, dict[str, float]]:
    """Teacher-forced statistics of the saved policy on perfect held-out demonstrations, per scaffold.

    `p_tool_first`: probability of opening the first turn with `<tool_call>`; `arg_accuracy`: greedy next-token
    accuracy inside the tool-call arguments (copying numbers and names). Rollout success needs the runtime and
    is measured with `agentrl eval --model <out_dir>`.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from agentrl.policy.loading import load_tokenizer

    tokenizer = load_tokenizer(str(out_dir))
    model = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32).eval()
    tool_call_id = tokenizer.convert_tokens_to_ids("<tool_call>")
    report = {}
    for name, (tasks, expert) in base_scaffolds().items():
        schemas = [t.schema for t in tasks.TOOLS]
        p_first, correct, total = [], 0, 0
        for task in tasks.tasks("test")[:100]:
            messages = expert.demonstration(task, random.Random(0), mistake_rate=0.0)
            prompt = tokenizer.apply_chat_template(
                messages[:2], tools=schemas, add_generation_prompt=True, return_dict=False
            )
            full = tokenizer.apply_chat_template(messages[:3], tools=schemas, return_dict=False)
            with torch.no_grad():
                logits = model(torch.tensor([full])).logits[0]
            p_first.append(logits[len(prompt) - 1].softmax(-1)[tool_call_id].item())
            # the arguments sit between the first '{"' after the prompt and the closing </tool_call>
            span = range(len(prompt) + 1, full.index(tokenizer.convert_tokens_to_ids("</tool_call>"), len(prompt)))
            correct += sum(int(logits[i - 1].argmax() == full[i]) for i in span)
            total += len(span)
        report[name] = {"p_tool_first": sum(p_first) / len(p_first), "arg_accuracy": correct / total}
    return report


def print_heldout_report(out_dir: Path) -> None:
    for name, stats in heldout_report(out_dir).items():
        print(f"held-out {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in stats.items()))


def finetune_and_save(
    model: Any, tokenizer: Any, demos: list[dict[str, Any]], out_dir: Path, **sft: Any
) -> dict[str, Any]:
    """SFT `model` on `demos` (`sft`: `run_sft` options), then save it with the toolless chat template."""
    from agentrl.doctor.tool_visibility import called_tools, record_trained_tools
    from agentrl.train.sft import run_sft

    print(", ".join(f"{n} {name}" for name, n in Counter(d["scaffold"] for d in demos).items()), flush=True)
    # the tiny policy learns its tools from the demonstrations, so its prompts carry no tool schemas
    # (TOOLLESS_TEMPLATE_PREFIX): ~40 prompt tokens instead of ~220, which is most of RL's cost on a CPU
    conversations = [{"messages": d["messages"], "tools": []} for d in demos]
    with tempfile.TemporaryDirectory() as scratch:
        metrics = run_sft(
            model, tokenizer, conversations, output_dir=scratch, batch_size=SFT_BATCH_SIZE, logging_steps=50, **sft
        )
    tokenizer.chat_template = TOOLLESS_TEMPLATE_PREFIX + tokenizer.chat_template
    # no schema tells it its tools: the checkpoint records the ones it learned (a run with others is refused)
    record_trained_tools(model.config, called_tools(d["messages"] for d in demos))
    save_policy(model, tokenizer, out_dir)
    return metrics


def build_base(out_dir: Path, *, mistake_rate: dict[str, float], epochs: float, lr: float, hidden_size: int) -> None:
    """Stage 1: tokenizer and model from scratch on the code and search demonstrations."""
    from agentrl.tiny.model import tiny_qwen2, tiny_qwen2_config
    from agentrl.tiny.tokenizer import render, train_tokenizer

    demos = demonstrations(mistake_rate, SEED, BASE_SOURCES)
    tokenizer = train_tokenizer((render(d["messages"], d["tools"]) for d in demos), vocab_size=VOCAB_SIZE)
    config = tiny_qwen2_config(len(tokenizer), hidden_size=hidden_size, num_hidden_layers=NUM_LAYERS)
    model = tiny_qwen2(config, seed=SEED)
    params = sum(p.numel() for p in model.parameters())
    print(f"vocabulary {len(tokenizer)}, {params / 1e6:.2f}M parameters", flush=True)
    metrics = finetune_and_save(model, tokenizer, demos, out_dir, epochs=epochs, lr=lr, seed=SEED)
    print(f"base SFT loss {metrics['train_loss']:.4f}", flush=True)


def _load(init_dir: Path) -> tuple[Any, Any]:
    """A saved stage's model and its tokenizer, the chat template as trl needs it for training."""
    import torch
    from transformers import AutoModelForCausalLM

    from agentrl.policy.loading import load_tokenizer

    tokenizer = load_tokenizer(str(init_dir))
    if not tokenizer.chat_template.startswith(TOOLLESS_TEMPLATE_PREFIX):
        raise ValueError(f"{init_dir} is not a tiny-policy stage (its chat template lacks the toolless prefix)")
    # trl recognises Qwen2.5's template (and adds its training markers) only without the prefix
    tokenizer.chat_template = tokenizer.chat_template.removeprefix(TOOLLESS_TEMPLATE_PREFIX)
    return AutoModelForCausalLM.from_pretrained(init_dir, dtype=torch.float32), tokenizer


def copy_stage(init_dir: Path, out_dir: Path, *, mistake_rate: dict[str, float]) -> None:
    """Stage 2: lead-in drills, then dense echo drills until the copying circuit has formed (the loss falls below
    `COPY_STOP_LOSS`)."""
    from agentrl.train.sft import run_sft

    model, tokenizer = _load(init_dir)
    warm = echo_drills(tokenizer, COPY_WARM_STEPS * SFT_BATCH_SIZE * 3 // 4, SEED, "lead-in", lead_in=True)
    warm += replay(mistake_rate, SEED, COPY_WARM_STEPS * SFT_BATCH_SIZE // 4, "lead-in")
    print(f"{len(warm)} lead-in drills and replayed demonstrations", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        run_sft(
            model,
            tokenizer,
            [{"messages": d["messages"], "tools": []} for d in warm],
            output_dir=scratch,
            batch_size=SFT_BATCH_SIZE,
            logging_steps=50,
            lr=COPY_LR,
            lr_scheduler="constant_with_warmup",
            warmup_fraction=0.01,
            max_steps=COPY_WARM_STEPS,
            seed=SEED,
        )
    drills = echo_drills(tokenizer, COPY_MAX_STEPS * SFT_BATCH_SIZE, SEED, "copy")
    demos = drills + replay(mistake_rate, SEED, round(COPY_REPLAY * len(drills)), "copy")
    metrics = finetune_and_save(
        model,
        tokenizer,
        demos,
        out_dir,
        lr=COPY_LR,
        lr_scheduler="constant_with_warmup",
        warmup_fraction=0.01,
        max_steps=COPY_MAX_STEPS,
        stop_at_loss=COPY_STOP_LOSS,
        seed=SEED,
        group_by_length=True,
    )
    steps, loss = (metrics["loss_history"] or [(COPY_MAX_STEPS, metrics["train_loss"])])[-1]
    print(f"copy stage stopped at step {steps}, loss {loss:.4f}", flush=True)


def extend_stage(
    init_dir: Path,
    out_dir: Path,
    *,
    mistake_rate: dict[str, float],
    passes: tuple[Pass, ...] = EXTEND_PASSES,
    single_punctuation: bool = False,
) -> None:
    """Stage 3: the easy tiers of the terminal, GUI and SWE scaffolds, with echo drills and base replay, in the
    `passes`; each starts from the saved (bf16) result of the one before. With `single_punctuation` the tokenizer
    pre-tokenizes one punctuation mark at a time from the first pass on (`tokenizer.split_punctuation`)."""
    previous = init_dir
    with tempfile.TemporaryDirectory() as scratch:
        for k, step in enumerate(passes):
            make_deterministic(step.seed)
            model, tokenizer = _load(previous)
            if single_punctuation:
                split_punctuation(tokenizer)
            demos = mixture(tokenizer, mistake_rate | (step.mistake_rate or {}), step.seed, step.counts, step.stream)
            out = out_dir if k == len(passes) - 1 else Path(scratch) / f"pass{k}"
            # conversations range from 50 tokens (code) to 1,000 (SWE drills): padding would dominate random batches
            metrics = finetune_and_save(
                model,
                tokenizer,
                demos,
                out,
                epochs=1.0,
                lr=step.lr,
                lr_scheduler=step.scheduler,
                warmup_fraction=step.warmup_fraction,
                seed=step.seed,
                group_by_length=True,
            )
            print(
                f"extend pass {k + 1}/{len(passes)} ({step.stream}): loss {metrics['train_loss']:.4f}",
                flush=True,
            )
            previous = out


def main(argv: list[str] | None = None) -> None:
    from agentrl.tiny import EXTENDED_POLICY_DIR, POLICY_DIR

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, help=f"where the last stage goes (default: {POLICY_DIR} and {EXTENDED_POLICY_DIR})"
    )
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, in order, of {STAGES}")
    parser.add_argument("--init", type=Path, help="the checkpoint the first stage starts from (not with base)")
    parser.add_argument("--keep", type=Path, help="also keep every stage's checkpoint under this directory")
    parser.add_argument("--epochs", type=float, default=SFT_EPOCHS, help="base stage epochs")
    parser.add_argument("--lr", type=float, default=SFT_LR, help="base stage learning rate")
    parser.add_argument("--hidden-size", type=int, default=HIDDEN_SIZE)
    parser.add_argument(
        "--extend-passes", choices=sorted(PASS_SETS), default="shipped", help="the extend stage's passes (SWE_PASSES)"
    )
    parser.add_argument(
        "--single-punctuation",
        action="store_true",
        help="extend stage: pre-tokenize one punctuation mark at a time (SINGLE_PUNCTUATION_PATTERN)",
    )
    for name, rate in MISTAKE_RATE.items():
        parser.add_argument(f"--{name.replace('_', '-')}-mistake-rate", type=float, default=rate)
    args = parser.parse_args(argv)
    rates = {name: getattr(args, f"{name}_mistake_rate") for name in MISTAKE_RATE}
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    if not stages or any(s not in STAGES for s in stages) or stages != sorted(stages, key=STAGES.index):
        parser.error(f"--stages: some of {STAGES}, in that order")
    if args.extend_passes != "shipped" and "extend" in stages and args.out is None:
        parser.error("--extend-passes other than `shipped` needs --out: it is not the shipped tiny-extended")
    if (stages[0] == "base") == (args.init is not None):
        parser.error("--init names the checkpoint to start from exactly when the base stage is not run")
    shipped = {"base": POLICY_DIR, "extend": EXTENDED_POLICY_DIR}
    with tempfile.TemporaryDirectory() as scratch:
        previous = args.init
        for stage in stages:
            if stage == stages[-1] and args.out:
                out = args.out
            elif args.out is None and stage in shipped:
                out = shipped[stage]
            else:
                out = (args.keep or Path(scratch)) / stage
            make_deterministic(SEED)
            start = time.perf_counter()
            print(f"--- {stage} stage -> {out}", flush=True)
            if stage == "base":
                build_base(out, mistake_rate=rates, epochs=args.epochs, lr=args.lr, hidden_size=args.hidden_size)
            elif stage == "copy":
                copy_stage(previous, out, mistake_rate=rates)
            else:
                passes = PASS_SETS[args.extend_passes]
                extend_stage(
                    previous, out, mistake_rate=rates, passes=passes, single_punctuation=args.single_punctuation
                )
            print(f"{stage} stage: {(time.perf_counter() - start) / 60:.1f} min", flush=True)
            print_heldout_report(out)
            if args.keep and out != args.keep / stage:
                shutil.copytree(out, args.keep / stage, dirs_exist_ok=True)
            previous = out


if __name__ == "__main__":
    sys.exit(main())
