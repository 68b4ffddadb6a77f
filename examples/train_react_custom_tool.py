"""Train the generic react scaffold on your own @tool and your own tasks.

    python examples/train_react_custom_tool.py        # 2 CPU cores, about a minute

What it shows: three steps of RL on the shipped tiny policy, its train reward rising from 0.5 to about 0.6 and
held-out success from about 0.4 to 0.5 (the last line prints it before and after). The tool is one the tiny policy
learned from demonstrations (`calculate(expression)`): its prompts carry no tool schemas, so it cannot call a tool
it never learned, and a run that offers it only such tools is refused (README: "Your own tools").
`AGENTRL_EXAMPLE_STEPS=1` runs one step.

The tool below is served by the built-in tool server (in-process here; `agentrl serve-tools --tools
examples.train_react_custom_tool` serves it over HTTP), and the tasks come from a JSONL file. The same run from
the command line, in the repository's root (a module of the working directory imports as `python -m` would):

    agentrl train scaffold=react tools=examples.train_react_custom_tool tasks=tasks.jsonl
"""

import json
import os
import tempfile
from pathlib import Path

from agentrl import tool
from agentrl.config import load_config
from agentrl.trainer import Trainer


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: Arithmetic such as "12 * (3 + 4)".
    """
    from agentrl.scaffolds.code.tools import evaluate, format_number

    return format_number(evaluate(expression))


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
            "scaffold=react",
            f"tools={__name__}:calculate",
            f"tasks={work / 'tasks.jsonl'}",
            f"trainer.steps={os.environ.get('AGENTRL_EXAMPLE_STEPS', '3')}",
            "rollout.prompts_per_step=4",
            "rollout.samples_per_prompt=4",
            "eval.max_tasks=8",
            f"output_dir={work}",
            "name=run",
        ],
    )
    Trainer(config, work / "run").run()
    metrics = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines()]
    heldout = [m["eval/success"] for m in metrics if "eval/success" in m]
    print(f"run directory: {work / 'run'}; held-out success {heldout[0]:.2f} → {heldout[-1]:.2f}")


if __name__ == "__main__":
    main()
