"""Rebuild the bundled tiny policy (`agentrl/tiny/policy/`) deterministically.

    python scripts/build_tiny_policy.py                 # about 23 minutes on 2 CPU cores
    python scripts/build_tiny_policy.py --out /tmp/p    # somewhere else, e.g. to compare with the shipped one
    python scripts/build_tiny_policy.py --extend --base agentrl/tiny/policy --out /tmp/e   # extend stage only

Base stage (the shipped policy): demonstrations from the imperfect scripted experts on the TRAIN tasks of the
code and search scaffolds → a byte-level BPE trained on their rendered text → a freshly initialised tiny Qwen2
→ SFT → saved as a transformers checkpoint (weights stored in bf16, loaded as fp32). Every source of randomness
is seeded and the thread count is fixed, so the same versions of torch/transformers/trl give the same files.

Extend stage (`--extend`, experimental, not shipped): the base policy, its tokenizer unchanged, fine-tuned on
demonstrations of the terminal scaffold's easy tier (generated training tasks only) and on synthetic drills in
the exact format of GUI and SWE easy-tier episodes (`scaffolds/gui/drills.py`, `scaffolds/swe/drills.py`; no
bundled task is among them), with base demonstrations replayed alongside; about 19 minutes. Measured: it keeps
code and search (teacher-forced argument accuracy 0.991 / 0.935 against the base's 0.994 / 0.944) and learns the
three formats, but does not yet copy what the held-out easy tasks need (terminal names it never saw, GUI element
numbers, SWE expressions): held-out easy success stays 0, so there is nothing for RL to raise. The policy copies
what the base stage taught it to copy (numbers, one per token): with terminal names spelled as a one-token word and
a number (`coins155`), trained on terminal demonstrations alone, it copies the number into held-out names but
mostly not the word (held-out easy success 0.03 at T = 1; mkdir 0.33).

The experts make mistakes on purpose (`MISTAKE_RATE`): the shipped policy calls its tools often but not always,
and RL from it has room to raise held-out success.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

THREADS = 2
SEED = 0
VOCAB_SIZE = 2560
HIDDEN_SIZE = 128
NUM_LAYERS = 4
MISTAKE_RATE = {"code": 0.5, "search": 0.5, "terminal": 0.3, "gui": 0.3, "swe": 0.3}
"""Probability that a demonstration is deliberately wrong, per scaffold."""
DRAWS = {"code": 1, "search": 8, "terminal": 3, "gui": 2000, "swe": 2000}
"""Expert conversations per training task (code, search, terminal; each draws its own mistakes), or drills (gui,
swe): the search world has a few thousand questions, the code scaffold tens of thousands of distinct ones."""
TERMINAL_PER_TEMPLATE = 60
"""Generated easy terminal tasks per template (training names only) that the terminal demonstrations cover."""
TOOLLESS_TEMPLATE_PREFIX = (
    "{#- The tiny policy learned its tools from demonstrations: tool schemas are not rendered, which keeps its "
    "prompts short. Tool calls and tool responses use the Qwen2.5 format unchanged. -#}\n{%- set tools = none %}\n"
)
SFT_EPOCHS = 1.25
SFT_LR = 3e-3
SFT_BATCH_SIZE = 16
BASE_SOURCES = ("code", "search")
"""The base stage: a fresh tokenizer and model learn these scaffolds (and, with them, to copy from the prompt)."""
EXTEND_SOURCES = ("terminal", "gui", "swe")
"""The extend stage: the base policy learns the easy tiers of these, with base demonstrations replayed alongside."""
EXTEND_EPOCHS = 1.0
EXTEND_LR = 1e-3
EXTEND_REPLAY = 1.0
"""Base demonstrations replayed in the extend stage, per new demonstration (keeps code and search from decaying)."""


def _scaffolds() -> dict[str, tuple[ModuleType, ModuleType]]:
    """(tasks module, expert module) per bundled scaffold whose held-out tasks `heldout_report` scores."""
    from agentrl.scaffolds.code import expert as code_expert
    from agentrl.scaffolds.code import tasks as code_tasks
    from agentrl.scaffolds.search import expert as search_expert
    from agentrl.scaffolds.search import tasks as search_tasks

    return {"code": (code_tasks, code_expert), "search": (search_tasks, search_expert)}


def _sources() -> dict[str, Callable[[random.Random, float], Iterator[tuple[list[dict[str, Any]], list[dict]]]]]:
    """Per scaffold: (rng, mistake rate) → its demonstrations, each (messages, tool schemas to render with)."""
    from agentrl.scaffolds.gui import drills as gui_drills
    from agentrl.scaffolds.swe import drills as swe_drills
    from agentrl.scaffolds.terminal import easy_family
    from agentrl.scaffolds.terminal import expert as terminal_expert
    from agentrl.scaffolds.terminal import tasks as terminal_tasks

    def expert_source(tasks: ModuleType, expert: ModuleType, draws: int) -> Callable:
        def source(rng: random.Random, rate: float) -> Iterator:
            schemas = [t.schema for t in tasks.TOOLS]
            for _ in range(draws):
                for task in tasks.tasks("train"):
                    yield expert.demonstration(task, rng, mistake_rate=rate), schemas

        return source

    def terminal(rng: random.Random, rate: float) -> Iterator:
        easy = [t for t in terminal_tasks.tasks("train") if t.metadata["tier"] == "easy"]
        known = {t.id for t in easy}
        more = [s.to_task() for s in easy_family.family("train", per_template=TERMINAL_PER_TEMPLATE)]
        for _ in range(DRAWS["terminal"]):
            for task in easy + [t for t in more if t.id not in known]:
                yield terminal_expert.demonstration(task, rng, mistake_rate=rate), []

    def drills(module: ModuleType, count: int) -> Callable:
        def source(rng: random.Random, rate: float) -> Iterator:
            for _ in range(count):
                yield module.demonstration(rng, mistake_rate=rate), []

        return source

    sources = {name: expert_source(*modules, DRAWS[name]) for name, modules in _scaffolds().items()}
    return sources | {
        "terminal": terminal,
        "gui": drills(gui_drills, DRAWS["gui"]),
        "swe": drills(swe_drills, DRAWS["swe"]),
    }


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


def demonstrations(mistake_rate: dict[str, float], seed: int, names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The named sources' demonstrations, with the tool schemas each is rendered with for the tokenizer."""
    sources, out = _sources(), []
    for name in names:
        rng = random.Random(f"{seed}/{name}")
        for messages, schemas in sources[name](rng, mistake_rate[name]):
            out.append({"messages": messages, "tools": schemas, "scaffold": name})
    return out


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
    for name, (tasks, expert) in _scaffolds().items():
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
    from agentrl.sft import run_sft

    # the tiny policy learns its tools from the demonstrations, so its prompts carry no tool schemas
    # (TOOLLESS_TEMPLATE_PREFIX): ~40 prompt tokens instead of ~220, which is most of RL's cost on a CPU
    conversations = [{"messages": d["messages"], "tools": []} for d in demos]
    with tempfile.TemporaryDirectory() as scratch:
        metrics = run_sft(
            model, tokenizer, conversations, output_dir=scratch, batch_size=SFT_BATCH_SIZE, logging_steps=50, **sft
        )
    tokenizer.chat_template = TOOLLESS_TEMPLATE_PREFIX + tokenizer.chat_template
    save_policy(model, tokenizer, out_dir)
    return metrics


def build(
    out_dir: Path, *, mistake_rate: dict[str, float], epochs: float, lr: float, hidden_size: int, seed: int = SEED
) -> None:
    """The base stage: tokenizer and model from scratch on the code and search demonstrations."""
    from agentrl.tiny.model import tiny_qwen2, tiny_qwen2_config
    from agentrl.tiny.tokenizer import render, train_tokenizer

    make_deterministic(seed)
    start = time.perf_counter()
    demos = demonstrations(mistake_rate, seed, BASE_SOURCES)
    tokenizer = train_tokenizer((render(d["messages"], d["tools"]) for d in demos), vocab_size=VOCAB_SIZE)
    config = tiny_qwen2_config(len(tokenizer), hidden_size=hidden_size, num_hidden_layers=NUM_LAYERS)
    model = tiny_qwen2(config, seed=seed)
    params = sum(p.numel() for p in model.parameters())
    print(f"{len(demos)} demonstrations, vocabulary {len(tokenizer)}, {params / 1e6:.2f}M parameters", flush=True)
    metrics = finetune_and_save(model, tokenizer, demos, out_dir, epochs=epochs, lr=lr, seed=seed)
    print(f"base SFT loss {metrics['train_loss']:.4f} in {(time.perf_counter() - start) / 60:.1f} min", flush=True)


def extend(base_dir: Path, out_dir: Path, *, mistake_rate: dict[str, float], seed: int = SEED) -> None:
    """The extend stage: the base policy, its tokenizer unchanged, fine-tuned on the terminal demonstrations and
    the GUI and SWE drills, with as many base demonstrations replayed among them.

    A second stage rather than one mixed run: trained from scratch on the mixture (31 minutes), the model never
    learned to copy from the prompt (held-out code success 0 at T = 1), while the base policy already copies and
    keeps doing so (0.93 after this stage, 0.98 before).
    """
    import torch
    from transformers import AutoModelForCausalLM

    from agentrl.policy.loading import load_tokenizer

    make_deterministic(seed)
    start = time.perf_counter()
    new = demonstrations(mistake_rate, seed, EXTEND_SOURCES)
    base = demonstrations(mistake_rate, seed, BASE_SOURCES)
    replay = random.Random(f"{seed}/replay").sample(base, k=min(len(base), round(EXTEND_REPLAY * len(new))))
    demos = new + replay
    print(", ".join(f"{n} {name}" for name, n in Counter(d["scaffold"] for d in demos).items()), flush=True)
    tokenizer = load_tokenizer(str(base_dir))
    if not tokenizer.chat_template.startswith(TOOLLESS_TEMPLATE_PREFIX):
        raise ValueError(f"{base_dir} is not a base-stage tiny policy (its chat template lacks the toolless prefix)")
    # trl recognises Qwen2.5's template (and adds its training markers) only without the prefix
    tokenizer.chat_template = tokenizer.chat_template.removeprefix(TOOLLESS_TEMPLATE_PREFIX)
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    # conversations range from 50 tokens (code) to 1,000 (SWE drills): padding would dominate random batches
    metrics = finetune_and_save(
        model, tokenizer, demos, out_dir, epochs=EXTEND_EPOCHS, lr=EXTEND_LR, seed=seed, group_by_length=True
    )
    size_mb = sum(f.stat().st_size for f in out_dir.iterdir()) / 1e6
    print(f"extend SFT loss {metrics['train_loss']:.4f}; saved {size_mb:.1f} MB to {out_dir}", flush=True)
    print_heldout_report(out_dir)
    print(f"extended in {(time.perf_counter() - start) / 60:.1f} min")


def main(argv: list[str] | None = None) -> None:
    from agentrl.tiny import POLICY_DIR

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=POLICY_DIR, help="checkpoint directory to (over)write")
    parser.add_argument("--epochs", type=float, default=SFT_EPOCHS)
    parser.add_argument("--lr", type=float, default=SFT_LR)
    parser.add_argument("--hidden-size", type=int, default=HIDDEN_SIZE)
    parser.add_argument("--extend", action="store_true", help="also run the (experimental) extend stage")
    parser.add_argument("--base", type=Path, help="with --extend: extend this base checkpoint instead of building one")
    for name, rate in MISTAKE_RATE.items():
        parser.add_argument(f"--{name}-mistake-rate", type=float, default=rate)
    args = parser.parse_args(argv)
    rates = {name: getattr(args, f"{name}_mistake_rate") for name in MISTAKE_RATE}
    if not args.extend:
        build(args.out, mistake_rate=rates, epochs=args.epochs, lr=args.lr, hidden_size=args.hidden_size)
        print_heldout_report(args.out)
        return
    with tempfile.TemporaryDirectory() as scratch:
        base = args.base
        if base is None:
            base = Path(scratch) / "base"
            build(base, mistake_rate=rates, epochs=args.epochs, lr=args.lr, hidden_size=args.hidden_size)
        extend(base, args.out, mistake_rate=rates)


if __name__ == "__main__":
    sys.exit(main())
