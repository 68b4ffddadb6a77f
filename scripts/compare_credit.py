"""GRPO vs IGPO on the bundled search tasks: same seeds, same budget, held-out curves side by side.

Arms, each a separate `agentrl train` run per seed under one output directory (`--arms`, default `grpo,igpo`):

- `grpo`: trajectory-level credit (`trainer.credit=trajectory`, `trainer.advantage=grpo`), outcome reward only;
- `igpo`: turn-level credit (`trainer.credit=igpo`) over the outcome reward plus information-gain turn rewards;
- `aepo_branch`: `grpo` whose rollouts branch where the policy is uncertain (`rollout.branching=aepo`).

Everything else (seed, steps, prompts and samples per step, limits, evaluation) is identical. Afterwards the
script reads every run's `metrics.jsonl` and writes, into the output directory:

- `heldout_success.png`: held-out success per arm against step and against wall minutes (thin lines per seed,
  thick line the mean over seeds);
- `compare.json` and `compare.md`: per seed and mean, held-out success at each eval step, seconds per step,
  reward seconds per step (each component and in total) and policy forward passes per step spent on reward
  probes.

    python scripts/compare_credit.py --out runs/compare_credit              # the full comparison
    python scripts/compare_credit.py --out /tmp/cc --seeds 0 --steps 2 --eval-every 1 --eval-tasks 4 \\
        --prompts 2 --samples 4                                             # a smoke test
    python scripts/compare_credit.py --out runs/compare_credit --report-only   # re-read finished runs

Figures from a 2-core machine are in docs/rewards_and_credit.md, and how they were measured in
docs/experiments/credit_comparison.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from statistics import mean
from typing import Any

ARMS = {
    "grpo": ["rewards=exact_match", "trainer.credit=trajectory", "trainer.advantage=grpo"],
    "igpo": ["rewards=exact_match,info_gain", "trainer.credit=igpo"],
    # GRPO whose rollouts branch where the policy is uncertain (same trajectories per task: forks count)
    "aepo_branch": [
        "rewards=exact_match",
        "trainer.credit=trajectory",
        "trainer.advantage=grpo",
        "rollout.branching=aepo",
    ],
}
EVAL_KEY = "eval/success"


def train_command(arm: str, seed: int, args: argparse.Namespace) -> list[str]:
    """The `agentrl train` command line of one arm and seed."""
    return [
        sys.executable,
        "-m",
        "agentrl.cli.app",
        "train",
        "--scaffold",
        "search",
        f"output_dir={args.out}",
        f"name={arm}_seed{seed}",
        f"seed={seed}",
        f"trainer.steps={args.steps}",
        f"rollout.prompts_per_step={args.prompts}",
        f"rollout.samples_per_prompt={args.samples}",
        f"eval.every_steps={args.eval_every}",
        f"eval.max_tasks={args.eval_tasks}",
        f"checkpoint_every_steps={args.steps}",
        "progress=false",
        "tensorboard=false",
        *ARMS[arm],
        *args.extra,
    ]


def summarise(run_dir: Path) -> dict[str, Any]:
    """One run's numbers: held-out success per eval step and the mean per-step costs of its training steps."""
    from agentrl.runlog.metrics_file import read_metrics

    records = read_metrics(run_dir)
    trained = [r for r in records if "time/step_s" in r]
    components = sorted({k.split("/")[1] for r in trained for k in r if k.startswith("reward_cost/")})

    def per_step(key: str) -> float | None:
        values = [r[key] for r in trained if isinstance(r.get(key), (int, float))]
        return mean(values) if values else None

    reward_seconds = {c: per_step(f"reward_cost/{c}/seconds") for c in components}
    forwards = {c: per_step(f"reward_cost/{c}/policy_forwards") for c in components}
    return {
        "heldout": {int(r["step"]): r[EVAL_KEY] for r in records if isinstance(r.get(EVAL_KEY), (int, float))},
        "steps": len(trained),
        "seconds_per_step": per_step("time/step_s"),
        "score_seconds_per_step": per_step("time/score_s"),
        "reward_seconds_per_step": reward_seconds,
        "reward_seconds_per_step_total": sum(v for v in reward_seconds.values() if v is not None),
        "reward_policy_forwards_per_step": forwards,
        "reward_policy_forwards_per_step_total": sum(v for v in forwards.values() if v is not None),
        "info_gain_probes_per_step": per_step("reward_cost/info_gain/probes"),
        "wall_min": {int(r["step"]): r["wall_s"] / 60 for r in records if isinstance(r.get("wall_s"), (int, float))},
    }


def aggregate(runs: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Per arm: the per-seed summaries and their means (held-out success per step over the seeds that have it)."""
    out: dict[str, Any] = {}
    for arm, seeds in runs.items():
        steps = sorted({s for r in seeds.values() for s in r["heldout"]})
        scalar = ("seconds_per_step", "reward_seconds_per_step_total", "reward_policy_forwards_per_step_total")
        out[arm] = {
            "seeds": {str(seed): r for seed, r in seeds.items()},
            "mean": {
                "heldout": {s: mean(r["heldout"][s] for r in seeds.values() if s in r["heldout"]) for s in steps},
                **{k: _mean(r[k] for r in seeds.values()) for k in scalar},
                "final_heldout": _mean(r["heldout"][max(r["heldout"])] for r in seeds.values() if r["heldout"]),
            },
        }
    return out


def _mean(values: Any) -> float | None:
    values = [v for v in values if v is not None]
    return mean(values) if values else None


def markdown(table: dict[str, Any]) -> str:
    """The comparison as markdown: held-out success per eval step, then per-step costs, per seed and mean."""
    steps = sorted({int(s) for arm in table.values() for s in arm["mean"]["heldout"]})
    lines = ["## Held-out success (search scaffold)", ""]
    lines.append("| arm | seed | " + " | ".join(f"step {s}" for s in steps) + " |")
    lines.append("|---|---|" + "---|" * len(steps))
    for arm, data in table.items():
        rows = [(seed, r["heldout"]) for seed, r in data["seeds"].items()] + [("mean", data["mean"]["heldout"])]
        for seed, heldout in rows:
            cells = [_fmt(heldout.get(s)) for s in steps]
            lines.append(f"| {arm} | {seed} | " + " | ".join(cells) + " |")
    lines += ["", "## Cost per training step", ""]
    lines.append(
        "| arm | seed | s/step | reward s/step (by component) | reward policy forwards/step | IG probes/step |"
    )
    lines.append("|---|---|---|---|---|---|")
    for arm, data in table.items():
        for seed, r in data["seeds"].items():
            parts = ", ".join(f"{c} {_fmt(v)}" for c, v in r["reward_seconds_per_step"].items())
            lines.append(
                f"| {arm} | {seed} | {_fmt(r['seconds_per_step'])} | {_fmt(r['reward_seconds_per_step_total'])} "
                f"({parts}) | {_fmt(r['reward_policy_forwards_per_step_total'])} | "
                f"{_fmt(r['info_gain_probes_per_step'])} |"
            )
        m = data["mean"]
        lines.append(
            f"| {arm} | mean | {_fmt(m['seconds_per_step'])} | {_fmt(m['reward_seconds_per_step_total'])} | "
            f"{_fmt(m['reward_policy_forwards_per_step_total'])} | |"
        )
    return "\n".join(lines) + "\n"


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def plot(runs: dict[str, dict[int, dict[str, Any]]], table: dict[str, Any], out_path: Path) -> Path:
    """Held-out success of both arms against step and wall minutes; per-seed thin lines, mean thick."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4), layout="constrained")
    FigureCanvasAgg(figure)
    by_step, by_time = figure.subplots(1, 2)
    for colour, (arm, seeds) in zip(("tab:blue", "tab:orange"), runs.items(), strict=False):
        for seed, r in seeds.items():
            steps = sorted(r["heldout"])
            ys = [r["heldout"][s] for s in steps]
            by_step.plot(steps, ys, color=colour, alpha=0.35, linewidth=1)
            minutes = [r["wall_min"].get(s, float("nan")) for s in steps]
            by_time.plot(minutes, ys, color=colour, alpha=0.35, linewidth=1, label=f"{arm} seed {seed}")
        mean_curve = table[arm]["mean"]["heldout"]
        steps = sorted(mean_curve)
        by_step.plot(steps, [mean_curve[s] for s in steps], color=colour, linewidth=2.4, marker="o", label=arm)
    for ax, xlabel in ((by_step, "step"), (by_time, "wall time (min)")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("held-out success")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small", frameon=False)
    seeds = sorted({s for r in runs.values() for s in r})
    figure.suptitle(f"search scaffold: {' vs '.join(runs)} (seeds {', '.join(map(str, seeds))})")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out_path, dpi=120)
    return out_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/compare_credit"), help="Output directory.")
    parser.add_argument("--seeds", default="0,1,2", help="Comma-separated seeds, shared by both arms.")
    parser.add_argument("--steps", type=int, default=30, help="Training steps per run.")
    parser.add_argument("--prompts", type=int, default=16, help="rollout.prompts_per_step")
    parser.add_argument("--samples", type=int, default=8, help="rollout.samples_per_prompt (group size G)")
    parser.add_argument("--eval-every", type=int, default=5, help="eval.every_steps")
    parser.add_argument("--eval-tasks", type=int, default=96, help="eval.max_tasks")
    parser.add_argument("--arms", default="grpo,igpo", help=f"Arms to run, from {', '.join(ARMS)}.")
    parser.add_argument("--report-only", action="store_true", help="Skip training; summarise existing runs.")
    parser.add_argument("--dry-run", action="store_true", help="Print the training commands and exit.")
    parser.add_argument("extra", nargs="*", help="Further config overrides for every run (key=value).")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"unknown arm(s) {unknown}; known: {', '.join(ARMS)}")

    for seed in seeds:
        for arm in arms:
            command = train_command(arm, seed, args)
            print("$", shlex.join(command), flush=True)
            if args.dry_run or args.report_only:
                continue
            if subprocess.run(command).returncode != 0:
                print(f"run {arm} seed {seed} failed", file=sys.stderr)
                return 1
    if args.dry_run:
        return 0
    runs = {arm: {seed: summarise(args.out / f"{arm}_seed{seed}") for seed in seeds} for arm in arms}
    table = aggregate(runs)
    (args.out / "compare.json").write_text(json.dumps(table, indent=2) + "\n")
    (args.out / "compare.md").write_text(markdown(table))
    path = plot(runs, table, args.out / "heldout_success.png")
    print(markdown(table))
    print(f"wrote {args.out / 'compare.json'}, {args.out / 'compare.md'} and {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
