# python examples/train_openai_agent.py        # 2 CPU cores, about a minute
"""Online RL for an agent written against the plain openai client: `agentrl train` runs it as the rollout.

`agent` below knows nothing of agentrl: it loops over chat completions with a local Python tool and returns its
final answer. The `agent` scaffold gives it an `AsyncOpenAI` client served by the very policy being trained (in
this process, no port), records every call token-exact through the gateway, and trains on the recorded episodes
every step, sampled with the current weights. The reward is the exact match of the returned answer with the
task's. The same run from the command line, with a task file, in the repository's root:

    agentrl train scaffold=agent agent=examples.train_openai_agent:agent tasks=tasks.jsonl

What it shows: three steps of online RL on the shipped tiny policy (it learned the `calculate` tool and the system
prompt below from demonstrations), its train reward between about 0.5 and 0.6 and held-out success rising from
about 0.4 to 0.5 (the last line prints it). `AGENTRL_EXAMPLE_STEPS=1` runs one step.
"""

import json
import os
import tempfile
from pathlib import Path

from agentrl.scaffolds.agent import AgentScaffold
from openai import AsyncOpenAI

from agentrl.config import load_config
from agentrl.trainer import Trainer
from agentrl.types import Task

SYSTEM_PROMPT = "Use the tools. Reply with only the final answer."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": 'Arithmetic such as "12 * (3 + 4)".'}},
                "required": ["expression"],
            },
        },
    }
]


def calculate(expression: str) -> str:
    """The agent's own tool, an ordinary Python function."""
    from agentrl.scaffolds.code.tools import evaluate, format_number

    try:
        return format_number(evaluate(expression))
    except ValueError as e:
        return f"error: {e}"


async def agent(task: Task, client: AsyncOpenAI, model: str) -> str | None:
    """Call the model, run the tools it asks for, send the results back, until it answers."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.prompt}]
    for _ in range(4):
        response = await client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments or "{}")
            result = calculate(str(arguments.get("expression", "")))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return None


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="agentrl-example-"))
    rows = [
        {"prompt": f"What is {a} * {b}?", "answer": str(a * b), "split": "test" if a % 5 == 0 else "train"}
        for a in range(101, 141)
        for b in (37, 59)
    ]
    (work / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    config = load_config(
        None,
        [
            f"trainer.steps={os.environ.get('AGENTRL_EXAMPLE_STEPS', '3')}",
            "rollout.prompts_per_step=4",
            "rollout.samples_per_prompt=4",
            "eval.max_tasks=8",
            f"output_dir={work}",
            "name=run",
        ],
    )
    Trainer(config, work / "run", scaffold=AgentScaffold(agent=agent, tasks=work / "tasks.jsonl")).run()
    metrics = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines()]
    heldout = [m["eval/success"] for m in metrics if "eval/success" in m]
    print(f"run directory: {work / 'run'}; held-out success {heldout[0]:.2f} → {heldout[-1]:.2f}")


if __name__ == "__main__":
    main()
