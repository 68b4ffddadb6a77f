"""Write easy SWE training tasks that no policy can memorise: each a drawn drill in a repository of its own.

    python -m agentrl.tiny.build.swe_drill_tasks --out DIR [--count 300] [--seed 0]
    AGENTRL_SWE_TASKS=DIR/tasks.jsonl AGENTRL_SWE_REPOS_DIR=DIR/repos agentrl train --scaffold swe tiers=easy ...

`agentrl swe synth` makes tasks from the training repositories, so their names and expressions recur from task to
task; these draw every path, function and expression afresh (`agentrl/tiny/build/swe_drills.py`, half the operands made
up), so RL on them can only pay for copying, never for recalling. The module holds the function with the wrong
expression; the hidden test compares the module with its fixed text (the code itself need not run), and a
visible test only checks the module is there. The bundled held-out (`test`) easy tasks are copied in with their
repositories, so evaluation runs on the same tasks as with the bundled set.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

from agentrl.scaffolds.swe import bundled
from agentrl.scaffolds.swe.instances import SweInstance
from agentrl.scaffolds.swe.repo_build import build_repository
from agentrl.scaffolds.swe.synthesis import copy_repository, unified_diff
from agentrl.tiny.build import swe_drills as drills

MADE_UP_OPERANDS = 0.5
VISIBLE = "tests/test_module.py"
HIDDEN = "tests/test_fix.py"


def module_text(drill: drills.Drill, expression: str) -> str:
    """The drill's module with `expression` where the statement's function computes it."""
    function = drill.statement.split("`")[3]
    name = function.rsplit(".", 1)[-1]
    body = f"def {name}(self):\n    return {expression}\n"
    if "." in function:
        body = f"class {function.split('.')[0]}:\n" + "".join(f"    {line}\n" for line in body.splitlines())
    return f'"""{drill.path}"""\n\n\n{body}'


def tests_for(drill: drills.Drill, fixed: str) -> tuple[str, str]:
    """(visible test, hidden test): the module exists; the module is exactly its `fixed` text."""
    visible = f"from pathlib import Path\n\n\ndef test_module_exists():\n    assert Path({drill.path!r}).is_file()\n"
    hidden = (
        f"from pathlib import Path\n\n\ndef test_fixed():\n    assert Path({drill.path!r}).read_text() == {fixed!r}\n"
    )
    return visible, hidden


def task(drill: drills.Drill, k: int, repos: Path) -> SweInstance:
    repo = f"agentrl-drills/drill-{k:04d}"
    before, after = module_text(drill, drill.wrong), module_text(drill, drill.right)
    visible, hidden = tests_for(drill, after)
    with tempfile.TemporaryDirectory(prefix="agentrl-drill-") as scratch:
        tree = Path(scratch)
        (tree / drill.path).parent.mkdir(parents=True, exist_ok=True)
        (tree / drill.path).write_text(before)
        (tree / VISIBLE).parent.mkdir(parents=True, exist_ok=True)
        (tree / VISIBLE).write_text(visible)
        commit = build_repository(tree, repos / repo.replace("/", "__"))
    return SweInstance(
        instance_id=f"drill-{k:04d}",
        repo=repo,
        base_commit=commit,
        problem_statement=drill.statement,
        patch=unified_diff(drill.path, before, after),
        test_patch=unified_diff(HIDDEN, "", hidden, new=True),
        fail_to_pass=(f"{HIDDEN}::test_fixed",),
        pass_to_pass=(f"{VISIBLE}::test_module_exists",),
        tier="easy",
        split="train",
        visible_tests=(VISIBLE,),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    repos = out / "repos"
    repos.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    records = []
    while len(records) < args.count:
        drill = drills.draw(rng, made_up_operands=MADE_UP_OPERANDS)
        if module_text(drill, drill.wrong).count(drill.wrong) == 1:  # else a str_replace of it is ambiguous
            records.append(task(drill, len(records), repos).to_record())
    for instance in bundled.instances():
        if instance.split == "test" and instance.tier == "easy":
            copy_repository(instance, bundled.repos_dir(), repos)
            records.append(instance.to_record())
    (out / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    print(f"{args.count} drill tasks and {len(records) - args.count} held-out easy tasks: {out / 'tasks.jsonl'}")


if __name__ == "__main__":
    main()
