"""Information-gain turn rewards: hand-checkable numbers on a toy, and the batched probe through the tiny policy."""

from __future__ import annotations

import asyncio
import math
import warnings

import pytest
from agentrl.rewards.info_gain import InfoGain, history_prefixes, information_gains

from agentrl.reward import RewardStack
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, Turn

pytestmark = pytest.mark.unit

CALL = (ToolCall("c", "lookup", {"q": "x"}),)


def turn(ids, obs=(), tool=True) -> Turn:
    return Turn(
        completion_ids=tuple(ids),
        logprobs=(0.0,) * len(ids),
        entropies=(0.0,) * len(ids),
        text="",
        tool_calls=CALL if tool else (),
        tool_results=(ToolResult("c", "r"),) if tool else (),
        observation_ids=tuple(obs),
    )


class ClueModel:
    """A toy model double: P(answer token) is 0.1, becomes 0.3 once token 7 is in the history and 0.7 once
    token 8 is; every other answer token has probability 1. So the answer's geometric-mean probability is
    exactly that number when the answer is one scored token (the others add log 1 = 0)."""

    def __init__(self):
        self.tokenizer = self
        self.calls = []

    def encode(self, text, add_special_tokens=False):
        return [int(x) for x in text.split()]

    def decode(self, ids):
        return "".join(f"{i} " for i in ids)  # round-trips through encode, so the probe joins tail and answer

    async def score_continuations(self, prefixes, continuations):
        self.calls.append(len(prefixes))
        out = []
        for prefix, cont in zip(prefixes, continuations, strict=True):
            p = 0.7 if 8 in prefix else 0.3 if 7 in prefix else 0.1
            out.append([math.log(p)] + [0.0] * (len(cont) - 1))
        return out


def igpo_rollout(clues: tuple[int, int]) -> Trajectory:
    turns = (turn([1], obs=[clues[0]]), turn([2], obs=[clues[1]]), turn([3], tool=False))
    return Trajectory("t", "g", "r", prompt_ids=(0,), turns=turns, stop_reason=StopReason.ANSWERED, answer="a")


def test_worked_example_7_3_turn_rewards():
    """§7.3 rollout 1: P(GT) 0.10 → 0.30 → 0.70 gives IG [0.20, 0.40]; the answer turn gets none."""
    model, gain = ClueModel(), InfoGain("prob_diff")
    values = asyncio.run(gain.turn_values(Task("t", "?", answer="5"), igpo_rollout((7, 8)), model))
    assert values[0] == pytest.approx(0.2) and values[1] == pytest.approx(0.4) and values[2] is None
    assert model.calls == [3]  # h_0, h_1, h_2 in one batched call
    log_values = asyncio.run(
        InfoGain("log_prob_diff").turn_values(Task("t", "?", answer="5"), igpo_rollout((7, 8)), model)
    )
    assert log_values[:2] == pytest.approx([math.log(3), math.log(0.7 / 0.3)])
    # rollout 2 of §7.3 as numbers: 0.10 → 0.05 → 0.06
    assert information_gains([math.log(x) for x in (0.1, 0.05, 0.06)], "prob_diff") == pytest.approx([-0.05, 0.01])


def test_values_land_in_the_turn_reward_slot_and_abstain_without_inputs():
    model = ClueModel()
    stack = RewardStack([(InfoGain(), 1.0)])
    scored = asyncio.run(stack.score(Task("t", "?", answer="5"), igpo_rollout((9, 8)), policy=model))
    assert [t.reward for t in scored.turns] == pytest.approx([0.0, 0.6, None])
    assert scored.turns[1].reward_components == pytest.approx({"info_gain": 0.6})
    unscored = asyncio.run(stack.score(Task("t", "?", answer=None), igpo_rollout((7, 8)), policy=model))
    assert [t.reward for t in unscored.turns] == [None, None, None]
    with pytest.warns(RuntimeWarning, match="no policy"):
        no_policy = asyncio.run(stack.score(Task("t", "?", answer="5"), igpo_rollout((7, 8))))
    assert [t.reward for t in no_policy.turns] == [None, None, None]
    with pytest.raises(ValueError):
        InfoGain("ratio")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tiny_policy(tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    from agentrl.policy import resolve_model_path
    from agentrl.policy.transformers_policy import TransformersPolicy

    model = AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny"))
    return TransformersPolicy(model, tiny_tokenizer)


def tiny_rollout(tok, question: str, observations: list[str]) -> Trajectory:
    def ids(text):
        return tok.encode(text, add_special_tokens=False)

    turns = [
        turn(
            ids('<tool_call>{"name": "lookup"}</tool_call><|im_end|>'),
            obs=ids(f"\n<|im_start|>user\n<tool_response>\n{o}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"),
        )
        for o in observations
    ]
    turns.append(turn(ids("Tolvar<|im_end|>"), tool=False))
    prompt = ids(f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
    return Trajectory(
        "t",
        "g",
        question,
        prompt_ids=tuple(prompt),
        turns=tuple(turns),
        stop_reason=StopReason.ANSWERED,
        answer="Tolvar",
    )


def test_probe_through_the_tiny_policy_is_batched_and_matches_unbatched_scoring(tiny_policy, tiny_tokenizer):
    import torch

    task = Task("t", "?", answer="Tolvar City")
    rollouts = [
        tiny_rollout(tiny_tokenizer, "Where is the Quell?", ["The Quell is in Tolvar City.", "ok"]),
        tiny_rollout(tiny_tokenizer, "Capital of Ardon?", ["Ardon's capital is Tolvar City."]),
    ]
    gain = InfoGain("log_prob_diff")
    before = tiny_policy.score_stats.forwards

    async def both():
        return await asyncio.gather(*(gain.turn_values(task, r, tiny_policy) for r in rollouts))

    values = asyncio.run(both())
    assert tiny_policy.score_stats.forwards - before == 1  # 3 + 2 probe rows from two trajectories, one prefill
    assert gain.probes == 5
    assert [v is None for v in values[0]] == [False, False, True] and [v is None for v in values[1]] == [False, True]

    answer = tiny_tokenizer.encode("Tolvar City", add_special_tokens=False)

    def mean_logp(prefix):  # the reference: one unpadded forward per history
        ids = torch.tensor([prefix + answer])
        with torch.no_grad():
            logp = torch.log_softmax(tiny_policy.model(ids).logits[0, len(prefix) - 1 : -1].float(), -1)
        return logp.gather(-1, torch.tensor(answer)[:, None]).mean().item()

    h = [mean_logp(p) for p in history_prefixes(rollouts[0])[:3]]
    assert values[0][:2] == pytest.approx([h[1] - h[0], h[2] - h[1]], abs=1e-4)
    # telescoping: the gains of consecutive tool turns add up to the change from the question to the last history
    assert sum(values[0][:2]) == pytest.approx(h[2] - h[0], abs=1e-4)
    assert all(math.isfinite(v) for v in values[0][:2] + values[1][:1])


def test_a_parse_error_turn_gets_a_gain_so_the_gains_telescope():
    """A malformed call answered with its parse error is an observation too: P(GT) 0.1 → 0.3 (tool round) → 0.7
    (the parse error's turn) gives [0.2, 0.4], summing to 0.7 − 0.1."""
    parse_error = Turn((2,), (0.0,), (0.0,), "", observation_ids=(8,), parse_error="unclosed <tool_call>")
    turns = (turn([1], obs=[7]), parse_error, turn([3], tool=False))
    rollout = Trajectory("t", "g", "r", prompt_ids=(0,), turns=turns, stop_reason=StopReason.ANSWERED)
    values = asyncio.run(InfoGain("prob_diff").turn_values(Task("t", "?", answer="5"), rollout, ClueModel()))
    assert values[:2] == pytest.approx([0.2, 0.4]) and values[2] is None
    assert sum(values[:2]) == pytest.approx(0.7 - 0.1)


def test_vllm_like_policy_abstains_loudly_once_and_is_counted():
    class Generates:  # a backend that samples but cannot score continuations (vLLM, an OpenAI endpoint)
        tokenizer = None

    gain = InfoGain()
    stack = RewardStack([(gain, 1.0)])
    items = [(Task("t", "?", answer="5"), igpo_rollout((7, 8)))] * 3
    with pytest.warns(RuntimeWarning, match="cannot score continuations") as caught:
        scored, costs = asyncio.run(stack.score_batch(items, policy=Generates()))
    assert len(caught) == 1  # once, not per trajectory
    assert all(t.reward is None for s in scored for t in s.turns)
    assert costs["reward_cost/info_gain/unscorable"] == 3.0 and gain.probes == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning from the same reward
        asyncio.run(stack.score_batch(items, policy=Generates()))
    assert gain.stats.unscorable == 6


def test_the_answer_is_tokenised_together_with_the_history_and_lead(tiny_tokenizer):
    """`lead` + answer are one text after the history: "The answer is " + "Tolvar" encodes " T" as one token,
    which three separate encodings would split into " " and "T"."""
    from agentrl.rewards.info_gain import history_tail, probe_continuation

    def ids(text):
        return tiny_tokenizer.encode(text, add_special_tokens=False)

    context = ids("<|im_start|>user\nWhere?<|im_end|>\n<|im_start|>assistant\n")
    tail = history_tail(tiny_tokenizer, context)
    assert tail == tuple(ids("assistant\n"))  # the text after the last special token
    lead = "The answer is "
    continuation, start, together = probe_continuation(tiny_tokenizer, tail, lead, "Tolvar City")
    assert together and continuation == ids("assistant\n" + lead + "Tolvar City")[len(tail) :]
    assert continuation != ids(lead) + ids("Tolvar City")  # what encoding the pieces apart would have probed
    assert tiny_tokenizer.decode(continuation[start:]) == " Tolvar City"  # the answer's tokens, the merged space too
    assert tiny_tokenizer.decode(continuation[:start]) == "The answer is"
    # an answer whose first token would swallow the end of the history cannot follow its sampled ids: lead and
    # answer are then encoded on their own, still as one text
    continuation, start, together = probe_continuation(tiny_tokenizer, tail, "", "\nTolvar")
    assert not together and continuation == ids("\nTolvar") and start == 0


def test_probe_rows_score_the_jointly_tokenised_answer(tiny_policy, tiny_tokenizer):
    task = Task("t", "?", answer="Tolvar City")
    rollout = tiny_rollout(tiny_tokenizer, "Where is the Quell?", ["The Quell is in Tolvar City."])
    gain = InfoGain("log_prob_diff", lead="The answer is ")
    values = asyncio.run(gain.turn_values(task, rollout, tiny_policy))
    assert gain.stats.separate_encodings == 0
    import torch

    def mean_logp(prefix):  # the reference: the joint text after the history, the answer's positions only
        text = tiny_tokenizer.decode(prefix[-2:]) + "The answer is Tolvar City"  # tail "assistant\n"
        joint = tiny_tokenizer.encode(text, add_special_tokens=False)[2:]
        answer_from = len(tiny_tokenizer.encode("assistant\nThe answer is", add_special_tokens=False)) - 2
        ids = torch.tensor([prefix + joint])
        with torch.no_grad():
            logp = torch.log_softmax(tiny_policy.model(ids).logits[0, len(prefix) - 1 : -1].float(), -1)
        return logp.gather(-1, torch.tensor(joint)[:, None])[answer_from:].mean().item()

    h = [mean_logp(p) for p in history_prefixes(rollout)[:2]]
    assert values[0] == pytest.approx(h[1] - h[0], abs=1e-4)
