# python examples/gateway_agents_sdk.py        # 2 CPU cores, about a minute; needs `pip install openai-agents`
"""An unmodified OpenAI Agents SDK agent, recorded through the agentrl gateway and trained on.

The agent knows nothing about agentrl: it talks to an OpenAI-compatible endpoint. Here that endpoint is the
recording gateway over the shipped tiny policy (the same as `agentrl serve --model tiny --record-dir rec/`,
started in-process so that this file runs on its own). Each agent run uses its own API key, so each becomes
one recorded session: a token-exact trajectory of every model call. A judge of our own scores the final
answers, the rewards go to the gateway's reward endpoint, and one learner step trains on the recorded
sessions, grouped by task (the runs of one prompt form a GRPO group).
"""

import asyncio
import tempfile
from pathlib import Path

import httpx
from agentrl.scaffolds.code import tasks
from agentrl.scaffolds.code.tools import evaluate, format_number
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from agentrl.config import TrainerConfig
from agentrl.serve.app import build_service, create_app
from agentrl.serve.recorded import load_recorded, train_recorded_step
from agentrl.testing import serve_in_thread

TASKS, RUNS_PER_TASK = 3, 4


@function_tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: The expression, e.g. 12 * (3 + 4).
    """
    try:
        return format_number(evaluate(expression))
    except ValueError as e:
        return f"error: {e}"


def judge(answer: str, expected: str) -> float:
    """Our own reward: 1 for the right number, a little format credit for a bare number, else 0."""
    answer = answer.strip()
    if answer == expected:
        return 1.0
    return 0.1 if answer.replace(".", "", 1).lstrip("-").isdigit() else 0.0


async def run_agent(base_url: str, session: str, prompt: str, seed: int) -> str:
    client = AsyncOpenAI(base_url=base_url, api_key=session)  # the API key names the recorded session
    agent = Agent(
        name="calculator",
        instructions=tasks.SYSTEM_PROMPT,
        tools=[calculate],
        model=OpenAIChatCompletionsModel(model="tiny", openai_client=client),
        model_settings=ModelSettings(temperature=1.0, max_tokens=64, extra_args={"seed": seed}),
    )
    try:
        result = await Runner.run(agent, prompt, max_turns=4)
        return str(result.final_output)
    except Exception as e:  # an agent that fails still produced a recorded session; it just scores 0
        return f"failed: {e}"
    finally:
        await client.close()


async def main() -> None:
    set_tracing_disabled(True)
    record_dir = Path(tempfile.mkdtemp()) / "rec"
    service = build_service("tiny", record_dir=record_dir, device="cpu")
    with serve_in_thread(create_app(service)) as url:
        for t, task in enumerate(tasks.tasks("train")[:TASKS]):
            answers = await asyncio.gather(
                *(run_agent(url + "/v1", f"task{t}-run{k}", task.prompt, seed=k) for k in range(RUNS_PER_TASK))
            )
            for k, answer in enumerate(answers):
                reward = judge(answer, task.answer)
                httpx.post(f"{url}/v1/sessions/task{t}-run{k}/reward", json={"reward": reward}).raise_for_status()
            print(f"{task.prompt!r} → {answers} (expected {task.answer})")
        sessions = httpx.get(f"{url}/v1/sessions").json()["sessions"]
    print(f"recorded {len(sessions)} sessions, {sum(s['turns'] for s in sessions)} model calls → {record_dir}")
    stats = train_recorded_step(
        service.policy.model, service.tokenizer, load_recorded(record_dir), TrainerConfig(lr=1e-4)
    )
    print("report:", stats.pop("report"))
    print({k: round(v, 4) for k, v in stats.items()})


if __name__ == "__main__":
    asyncio.run(main())
