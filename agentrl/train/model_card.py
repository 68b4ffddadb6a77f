"""Model cards: the `README.md` of a saved model folder, which the Hub shows as the model's page.

    write_run_model_card(ckpt / "policy", run_dir, step=10)     # a checkpoint of `agentrl train`
    write_model_card(out, base_model="tiny", step=3)            # any other saved model

A card holds YAML metadata the Hub indexes (`library_name`, `base_model` when it is a hub id, `pipeline_tag`, the
tags `agentrl` and `reinforcement-learning`) and a body saying what the model was trained from, with which agentrl
version, how far (the step), how well (the latest held-out success and train reward logged at or before that
step) and with which config (the run's `config.toml`). Written with `huggingface_hub.ModelCard`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from agentrl.runlog.metrics_file import Record, read_metrics

CARD_FILE = "README.md"
TAGS = ["agentrl", "reinforcement-learning"]
CARD_METRICS = ("eval/success", "reward/mean", "success/mean")
"""Metrics a card reports (plus `eval/success/<scaffold>` when several scaffolds were evaluated)."""
METRIC_LABELS = {"eval/success": "held-out success", "reward/mean": "train reward", "success/mean": "train success"}


def write_model_card(
    folder: str | Path,
    *,
    base_model: str,
    step: int | None = None,
    config_toml: str | None = None,
    metrics: Mapping[str, float] | None = None,
    measured_at: Mapping[str, int] | None = None,
    title: str | None = None,
) -> Path:
    """Write `folder/README.md`; `measured_at` gives the step each metric was logged at, where it is known."""
    from huggingface_hub import ModelCard, ModelCardData

    folder = Path(folder)
    data = ModelCardData(
        # a LoRA checkpoint saves only its adapters, which peft loads onto the base model
        library_name="peft" if (folder / "adapter_config.json").exists() else "transformers",
        base_model=base_model if is_hub_id(base_model) else None,
        pipeline_tag="text-generation",
        tags=list(TAGS),
    )
    body = _body(title or folder.name, base_model, step, config_toml, metrics or {}, measured_at or {})
    path = folder / CARD_FILE
    ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}").save(path)
    return path


def write_run_model_card(folder: str | Path, run_dir: str | Path, step: int) -> Path:
    """The card of the model saved at `step` of the run in `run_dir`: its `config.toml`, and the latest of the
    card's metrics in its `metrics.jsonl` up to `step`."""
    run_dir = Path(run_dir)
    config_file = run_dir / "config.toml"
    config_toml = config_file.read_text() if config_file.is_file() else None
    base_model = "tiny"  # the default of policy.model
    if config_toml is not None:
        base_model = tomllib.loads(config_toml).get("policy", {}).get("model", base_model)
    metrics, measured_at = latest_metrics(read_metrics(run_dir), step)
    return write_model_card(
        folder,
        base_model=base_model,
        step=step,
        config_toml=config_toml,
        metrics=metrics,
        measured_at=measured_at,
        title=f"{run_dir.resolve().name} (step {step})",
    )


def latest_metrics(records: list[Record], step: int) -> tuple[dict[str, float], dict[str, int]]:
    """The last logged value of each card metric at or before `step`, and the step it was logged at."""
    keys = [*CARD_METRICS, *sorted({k for r in records for k in r if k.startswith("eval/success/")})]
    values: dict[str, float] = {}
    measured_at: dict[str, int] = {}
    for record in records:
        if int(record["step"]) > step:
            break
        for key in keys:
            if isinstance(record.get(key), (int, float)):
                values[key], measured_at[key] = float(record[key]), int(record["step"])
    return {k: values[k] for k in keys if k in values}, measured_at


def is_hub_id(name: str) -> bool:
    """Whether `name` is a hub repository id (not a shipped policy or a local path): the Hub links the card's
    `base_model` to that repository, and rejects a value that is not one."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    from agentrl.tiny import SHIPPED

    if name in SHIPPED or Path(name).exists():
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _body(
    title: str,
    base_model: str,
    step: int | None,
    config_toml: str | None,
    metrics: Mapping[str, float],
    measured_at: Mapping[str, int],
) -> str:
    from agentrl import __version__

    trained = f"Trained with agentrl {__version__} from `{base_model}`"
    lines = [f"# {title}", "", trained + (f" for {step} steps." if step is not None else "."), ""]
    lines += [
        "Load it with `AutoModelForCausalLM.from_pretrained` and `AutoTokenizer.from_pretrained` on this folder or",
        "its hub repository; `agentrl eval --model` and `agentrl serve --model` take it as well.",
        "",
    ]
    if metrics:
        lines += ["## Metrics", "", "| metric | value | step |", "|---|---|---|"]
        for key, value in metrics.items():
            label = METRIC_LABELS.get(key, key)
            at = measured_at.get(key)
            lines.append(f"| {label} (`{key}`) | {value:.4g} | {'' if at is None else at} |")
        lines.append("")
    if config_toml:
        lines += ["## Training config", "", "```toml", config_toml.rstrip(), "```", ""]
    return "\n".join(lines)
