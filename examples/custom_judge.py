# python examples/custom_judge.py        # 2 CPU cores, a few seconds, no network (a scripted judge on 127.0.0.1)
"""Write your own rewards: a plain `@reward` function and an LLM-as-judge with a rubric.

Both are ordinary rewards: put them in any module and name them on the command line, e.g.

    AGENTRL_JUDGE_MODEL=openai/gpt-4o-mini agentrl train --scaffold search \\
        "rewards=[exact_match,examples.custom_judge:answer_judge:0.5,examples.custom_judge:short_answer:0]"

(weight 0 keeps a reward as a metric only). Run as a script, this file scores three episodes with both rewards;
the judge model is a scripted OpenAI-compatible server on 127.0.0.1 that reads the rubric and the answer the
way a real judge would, so nothing leaves the machine. Pass `--base-url URL --model NAME` to use a real one.
"""

from __future__ import annotations

import argparse
import asyncio
import re

from agentrl.rewards.outcome import exact_match

from agentrl.judge import Judge
from agentrl.reward import RewardStack, reward
from agentrl.types import StopReason, Task, Trajectory, Turn


@reward
def short_answer(answer: str | None) -> float | None:
    """1.0 for answers of at most five words; abstains when there is no answer."""
    if answer is None:
        return None
    return float(len(answer.split()) <= 5)


class AnswerJudge(Judge):
    """Does the final answer agree with the reference? A judge sees paraphrases that exact match misses."""

    inputs = ("task", "answer")
    system = "You grade answers strictly and briefly."
    rubric = (
        "Question: {question}\nReference answer: {reference}\nCandidate answer: {answer}\n"
        "Does the candidate say the same as the reference? Reply with one line of reasoning, then "
        "\\boxed{{1}} if it does or \\boxed{{0}} if it does not."
    )

    def fields(self, task: Task, answer: str | None) -> dict[str, str] | None:
        if task.answer is None or answer is None:
            return None  # nothing to judge: abstain without a request
        return {"question": task.prompt, "reference": task.answer, "answer": answer}

    # `parse` (the last \boxed{number}) and `aggregate` (the mean of the votes) are Judge's defaults


answer_judge = AnswerJudge(votes=3, temperature=0.7, concurrency=8, timeout_s=30)
"""Its endpoint comes from AGENTRL_JUDGE_MODEL / AGENTRL_JUDGE_BASE_URL / AGENTRL_JUDGE_API_KEY."""


def scripted_judge(messages: list[dict]) -> str:
    """Stands in for the judge model: compares the words of reference and candidate."""
    prompt = messages[-1]["content"]
    reference = re.search(r"Reference answer: (.*)", prompt).group(1).lower()
    candidate = re.search(r"Candidate answer: (.*)", prompt).group(1).lower()
    same = set(reference.split()) <= set(candidate.replace(".", "").split())
    return f"The candidate {'matches' if same else 'differs from'} the reference. \\boxed{{{int(same)}}}"


def episode(answer: str | None) -> Trajectory:
    turn = Turn(completion_ids=(1,), logprobs=(0.0,), entropies=(0.0,), text=answer or "")
    stop = StopReason.ANSWERED if answer is not None else StopReason.MAX_TURNS
    return Trajectory("quell", "g", answer or "none", prompt_ids=(0,), turns=(turn,), stop_reason=stop, answer=answer)


async def score_examples(judge: AnswerJudge) -> None:
    task = Task("quell", "Where is the Quell kept?", answer="Tolvar City")
    stack = RewardStack([(exact_match, 1.0), (judge, 0.5), (short_answer, 0.0)])
    for answer in ("Tolvar City", "It is kept in Tolvar City.", "Ardon", None):
        scored = await stack.score(task, episode(answer))
        print(f"{answer!r:32} reward {scored.reward:5.2f}  components {scored.reward_components}")
    print(f"judge stats: {judge.stats}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: a scripted one on 127.0.0.1)")
    parser.add_argument("--model", default="judge", help="the judge model (a litellm model name)")
    args = parser.parse_args()
    if args.base_url:
        asyncio.run(score_examples(AnswerJudge(args.model, base_url=args.base_url, votes=3, temperature=0.7)))
        return
    from agentrl.testing import scripted_chat_app, serve_in_thread

    with serve_in_thread(scripted_chat_app(scripted_judge)) as url:
        asyncio.run(score_examples(AnswerJudge(args.model, base_url=url + "/v1", votes=3, temperature=0.7)))


if __name__ == "__main__":
    main()
