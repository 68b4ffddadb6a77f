"""How well a checkpoint copies the easy SWE tier's fix: the teacher-forced `str_replace` call of each task.

An easy issue quotes the file, the wrong expression and the right one, and the fix is one `str_replace` call that
copies them. For each bundled easy task this feeds the checkpoint the episode's opening (system prompt and issue)
followed by that call, and reports per task

- `p_call`: the probability of the whole call (assistant turn up to `</tool_call>`) at T = 1;
- `greedy_exact`: whether every token of it is the argmax, i.e. whether greedy decoding writes it;
- `same_tokens`: whether both expressions are the same tokens in the call as in the issue, but for the backslashes
  that escape quotes. The call writes them as JSON strings; where the tokenizer merges punctuation runs, a quote
  (`\\".\\")` against `".")`) or a value opening with punctuation (` "(`) tokenizes differently, and the policy
  cannot copy those token for token;
- the argmax accuracy of its tokens by part (`format`, `path`, `old_str`, `new_str`);
- each token where the argmax is wrong: the text before it, the wanted token, the argmax, the wanted token's
  probability.

RL samples at T = 1 and sharpens what the policy already prefers, so a task whose call is not `greedy_exact`
is one that sharpening alone does not solve.

    python -m agentrl.tiny.build.swe_copy_report --model tiny-swe                 # held-out easy tasks
    python -m agentrl.tiny.build.swe_copy_report --model runs/x/checkpoints/step_000040/policy \\
        --split train --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

PARTS = ("format", "path", "old_str", "new_str")


@dataclass
class CallReport:
    """One task's teacher-forced fix call."""

    instance_id: str
    p_call: float
    greedy_exact: bool
    same_tokens: bool
    accuracy: dict[str, float]
    """Argmax accuracy of the call's tokens, per part (PARTS)."""
    misses: list[dict[str, Any]] = field(default_factory=list)


def fix_call(statement: str) -> dict[str, str]:
    """The `str_replace` arguments an easy statement asks for: it quotes the path, the function, the wrong
    expression and the right one, in that order."""
    from agentrl.tiny.build.swe_drills import quoted_spans

    quoted = quoted_spans(statement)
    if len(quoted) < 4:
        raise ValueError(f"not an easy-tier statement (fewer than four quoted spans): {statement!r}")
    return {"path": quoted[0], "old_str": quoted[2], "new_str": quoted[3]}


def same_tokens(tokenizer: Any, expression: str) -> bool:
    """Whether `expression`'s tokens between the issue's backticks occur as a run in its call's tokens, once the
    tokens that are a lone backslash (JSON's escapes) are taken out of the call."""
    quoted = tokenizer.encode(f"`{expression}`", add_special_tokens=False)
    if tokenizer.decode(quoted[:1]) != "`" or tokenizer.decode(quoted[-1:]) != "`":
        return False
    quoted = quoted[1:-1]
    written = tokenizer.encode(f'"old_str": {json.dumps(expression)}, "', add_special_tokens=False)
    written = [t for t in written if tokenizer.decode([t]) != "\\"]
    return any(written[i : i + len(quoted)] == quoted for i in range(len(written) - len(quoted) + 1))


def part_of(prefix: str) -> str:
    """Which part of the call a token belongs to, from the decoded call text before it: the last argument whose
    value has opened. The token closing a value counts with it (where to stop copying is part of the copy)."""
    opened = [name for name in PARTS[1:] if f'"{name}": "' in prefix]
    return opened[-1] if opened else "format"


def opening(statement: str) -> list[dict[str, str]]:
    """The episode's messages before the policy's first turn: the SWE system prompt and the issue."""
    from agentrl.scaffolds.swe.scaffold import SYSTEM_PROMPT
    from agentrl.tiny.build.swe_drills import issue_message

    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": issue_message(statement)}]


def call_report(model: Any, tokenizer: Any, instance_id: str, statement: str) -> CallReport:
    import torch

    from agentrl.scaffolds.demonstration import tool_call_messages

    arguments = fix_call(statement)
    start = opening(statement)
    call = tool_call_messages("str_replace", arguments, "", call_id="call_0_0")[:1]
    prompt = tokenizer.apply_chat_template(start, add_generation_prompt=True, return_dict=False)
    ids = tokenizer.apply_chat_template(start + call, return_dict=False)
    if ids[: len(prompt)] != prompt:
        raise ValueError("the chat template renders the opening differently with a reply after it")
    end = ids.index(tokenizer.convert_tokens_to_ids("</tool_call>"), len(prompt)) + 1
    with torch.no_grad():
        logprobs = model(torch.tensor([ids[:end]])).logits[0].float().log_softmax(-1)
    right = {name: [0, 0] for name in PARTS}
    total, misses = 0.0, []
    for i in range(len(prompt), end):
        logprob = logprobs[i - 1]
        total += logprob[ids[i]].item()
        best = int(logprob.argmax())
        part = part_of(tokenizer.decode(ids[len(prompt) : i]))
        right[part][0] += best == ids[i]
        right[part][1] += 1
        if best != ids[i]:
            misses.append(
                {
                    "before": tokenizer.decode(ids[max(len(prompt), i - 4) : i]),
                    "want": tokenizer.decode([ids[i]]),
                    "argmax": tokenizer.decode([best]),
                    "p_want": round(math.exp(logprob[ids[i]].item()), 3),
                }
            )
    accuracy = {name: ok / n for name, (ok, n) in right.items() if n}
    same = all(same_tokens(tokenizer, arguments[name]) for name in ("old_str", "new_str"))
    return CallReport(instance_id, math.exp(total), not misses, same, accuracy, misses)


def report(model_name: str, split: str = "test") -> list[CallReport]:
    """`call_report` for every bundled easy task of `split`."""
    import torch
    from transformers import AutoModelForCausalLM

    from agentrl.policy.loading import load_tokenizer, resolve_model_path
    from agentrl.scaffolds.swe import bundled

    path = resolve_model_path(model_name)
    tokenizer = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tasks = [i for i in bundled.instances() if i.tier == "easy" and i.split == split]
    return [call_report(model, tokenizer, i.instance_id, i.problem_statement) for i in tasks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny-swe", help="`tiny-swe`, another shipped name, or a checkpoint")
    parser.add_argument("--split", default="test", choices=("train", "test"))
    parser.add_argument("--json", help="also write the reports here")
    args = parser.parse_args(argv)
    reports = report(args.model, args.split)
    for r in reports:
        parts = " ".join(f"{name} {r.accuracy.get(name, 1.0):.2f}" for name in PARTS)
        flags = f"{'greedy-exact' if r.greedy_exact else '':12} {'' if r.same_tokens else 'retokenized':11}"
        print(f"{r.instance_id:32} p_call {r.p_call:.3f} {flags} {parts}")
        for miss in r.misses:
            print(f"    {miss['before']!r} -> want {miss['want']!r}, argmax {miss['argmax']!r} (p {miss['p_want']})")
    exact = sum(r.greedy_exact for r in reports)
    mean_p = sum(r.p_call for r in reports) / max(len(reports), 1)
    same = sum(r.same_tokens for r in reports)
    print(
        f"{exact}/{len(reports)} greedy-exact, mean p_call {mean_p:.4f}, {same}/{len(reports)} copied token for token"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in reports], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
