"""Outcome rewards: math equivalence, tests-pass, the format gate and DAPO overlong shaping."""

from __future__ import annotations

import asyncio
import threading

import pytest
from agentrl.rewards import outcome
from agentrl.rewards.outcome import exact_match, format_gate, format_gated, math_equivalence, overlong_penalty

from agentrl.types import StopReason, Task, ToolResult, Trajectory, Turn

pytestmark = pytest.mark.unit


def task(answer: str | None = "42") -> Task:
    return Task(id="t", prompt="?", answer=answer)


def trajectory(
    *,
    sampled: int = 4,
    parse_error: str | None = None,
    answer: str | None = "42",
    stop: StopReason = StopReason.ANSWERED,
) -> Trajectory:
    turn = Turn(
        completion_ids=(1,) * sampled,
        logprobs=(0.0,) * sampled,
        entropies=(0.0,) * sampled,
        text="",
        parse_error=parse_error,
    )
    return Trajectory("t", "g", "x", prompt_ids=(0,), turns=(turn,), stop_reason=stop, answer=answer)


@pytest.mark.parametrize(
    ("gold", "pred", "expected"),
    [
        ("1/2", "$\\frac{1}{2}$", 1.0),
        ("0.5", "\\boxed{\\frac{1}{2}}", 1.0),
        ("$\\{1,2\\}$", "$\\{2,1\\}$", 1.0),
        ("3", "4", 0.0),
        ("$x^2+2x+1$", "$(x+1)^2$", 1.0),
        ("$(0,1]$", "$(0,1)$", 0.0),
        ("Paris", "paris", 1.0),  # nothing mathematical to parse: falls back to normalised exact match
    ],
)
def test_math_equivalence(gold, pred, expected):
    assert math_equivalence.fn(task(gold), pred) == expected


def test_math_equivalence_off_the_main_thread():
    out = []
    thread = threading.Thread(target=lambda: out.append(math_equivalence.fn(task("1/2"), "0.5")))
    thread.start()
    thread.join()
    assert out == [1.0]


def test_outcome_rewards_abstain_without_their_inputs():
    assert math_equivalence.fn(task(None), "1") is None
    assert math_equivalence.fn(task("1"), None) == 0.0
    assert exact_match.fn(task(None), "1") is None
    assert outcome.tests_pass_fraction.fn([]) is None
    assert outcome.tests_pass_fraction.fn([ToolResult("c", "no tests here")]) is None
    assert outcome.tests_pass_all.fn([ToolResult("c", "hello")]) is None


def test_tests_pass_reads_the_latest_run_from_metrics_or_pytest_summary():
    first = ToolResult("a", "==== 1 passed, 3 failed in 0.1s ====")
    second = ToolResult("b", "== 3 passed, 1 failed, 1 error in 0.3s ==")
    assert outcome.tests_pass_fraction.fn([first]) == 0.25
    assert outcome.tests_pass_fraction.fn([first, second, ToolResult("c", "ls output")]) == 3 / 5
    via_metrics = ToolResult("d", "ran", metrics={"tests_passed": 4.0, "tests_total": 4.0})
    assert outcome.tests_pass_fraction.fn([second, via_metrics]) == 1.0
    assert outcome.tests_pass_all.fn([second, via_metrics]) == 1.0
    assert outcome.tests_pass_all.fn([via_metrics, second]) == 0.0


def test_format_gate_and_gated_reward():
    good, malformed = trajectory(), trajectory(parse_error="unclosed <tool_call>")
    cut = trajectory(stop=StopReason.MAX_TURNS, answer=None)
    assert [format_gate.fn(t) for t in (good, malformed, cut)] == [1.0, 0.0, 0.0]
    gated = format_gated(exact_match, penalty=-2.0)
    assert gated.name == "exact_match_gated" and set(gated.inputs) == {"task", "answer", "trajectory"}

    def score(t: Trajectory, tk: Task) -> float | None:
        return asyncio.run(gated(task=tk, answer=t.answer, trajectory=t))

    assert score(good, task("42")) == 1.0
    assert score(trajectory(answer="41"), task("42")) == 0.0
    assert score(malformed, task("42")) == -2.0
    assert score(good, task(None)) is None  # the inner reward abstains: the gate does not invent a score


def test_overlong_shaping_is_zero_then_linear_to_minus_factor():
    shaped = overlong_penalty(max_tokens=100, buffer_tokens=20, factor=0.5)
    values = {n: shaped.fn(trajectory(sampled=n)) for n in (10, 80, 90, 100, 120)}
    assert values[10] == 0.0 and values[80] == 0.0
    assert values[90] == pytest.approx(-0.25)
    assert values[100] == pytest.approx(-0.5)
    assert values[120] == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        overlong_penalty(max_tokens=10, buffer_tokens=0)
