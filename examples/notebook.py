# python examples/notebook.py        # 2 CPU cores, about a minute; or open it as a notebook (its cells are `# %%`)
"""Train from a notebook: the tool, the tasks and the reward are Python objects, not import paths.

What it shows: three steps of RL on the shipped tiny policy, whose train reward climbs from about 0.4 to 0.7 and
held-out success from about 0.5 to 0.6 (the last line prints the held-out success before and after). The tiny
policy knows a `calculate(expression)` tool from its demonstrations (its prompts carry no tool schemas), so the
tool below is one it can call; a tool it never learned would be refused before the run starts (README: "Your own
tools"). `AGENTRL_EXAMPLE_STEPS=1` runs one step (what CI runs).

In Jupyter, `trainer.run()` works as in a script (the run goes on in a thread of its own while the cell waits;
interrupting the kernel stops it after the current step, checkpointed), and `await trainer.arun()` leaves the
notebook's event loop free. Resume a stopped run with `Trainer.from_run_dir(run_dir, tools=[…], tasks=…,
rewards=[…])`: objects are not saved in the run's config.toml.
"""

# %%
import asyncio
import json
import os
import tempfile

from agentrl import tool
from agentrl.reward import reward
from agentrl.trainer import Trainer


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: Arithmetic such as "12 * (3 + 4)".
    """
    from agentrl.scaffolds.code.tools import evaluate, format_number

    return format_number(evaluate(expression))


@reward
def correct(task, answer) -> float:
    """1 when the final answer is the task's answer (rewards ask for what they need by parameter name)."""
    return float((answer or "").strip() == task.answer)


tasks = [
    {"prompt": f"What is {a} * {b}?", "answer": a * b, "split": "test" if a % 5 == 0 else "train"}
    for a in range(101, 141)
    for b in (37, 59)
]

# %%
steps = int(os.environ.get("AGENTRL_EXAMPLE_STEPS", "3"))
trainer = Trainer(
    [f"trainer.steps={steps}", "rollout.prompts_per_step=4", "eval.max_tasks=8", f"output_dir={tempfile.mkdtemp()}"],
    tools=[calculate],
    tasks=tasks,
    rewards=[correct],
)

# %%  in a notebook cell: `await trainer.arun()`
asyncio.run(trainer.arun())
metrics = [json.loads(line) for line in (trainer.run_dir / "metrics.jsonl").read_text().splitlines()]
heldout = [m["eval/success"] for m in metrics if "eval/success" in m]
print(f"run directory: {trainer.run_dir}; held-out success {heldout[0]:.2f} → {heldout[-1]:.2f}")
