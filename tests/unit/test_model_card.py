"""Model cards of saved models: the Hub's YAML metadata, the base model, the agentrl version, the step, the latest
metrics up to that step and the run's config."""

from __future__ import annotations

import tomllib

import pytest
from huggingface_hub import ModelCard

import agentrl
from agentrl.config import dump_toml, load_config
from agentrl.runlog.metrics import MetricsLogger
from agentrl.train.model_card import is_hub_id, write_model_card, write_run_model_card

pytestmark = pytest.mark.unit


def make_run(run_dir, model="Qwen/Qwen2.5-0.5B-Instruct"):
    config = load_config(None, [f"policy.model={model}", "scaffold=search", "trainer.lr=3e-6"])
    run_dir.mkdir(parents=True)
    (run_dir / "config.toml").write_text(dump_toml(config))
    with MetricsLogger(run_dir, tensorboard=False) as metrics:
        metrics.log(0, {"eval/success": 0.25})
        metrics.log(1, {"reward/mean": 0.1, "success/mean": 0.1})
        metrics.log(2, {"reward/mean": 0.3, "success/mean": 0.2, "eval/success": 0.5})
        metrics.log(3, {"reward/mean": 0.4, "success/mean": 0.35})
        metrics.log(4, {"reward/mean": 0.9, "eval/success": 0.9})  # after the checkpoint the card describes
    return config


def test_a_run_checkpoint_card_holds_metadata_step_latest_metrics_and_config(tmp_path):
    run_dir = tmp_path / "demo"
    make_run(run_dir)
    folder = tmp_path / "policy"
    folder.mkdir()
    card = ModelCard.load(write_run_model_card(folder, run_dir, step=3))
    assert card.data.base_model == "Qwen/Qwen2.5-0.5B-Instruct"
    assert card.data.library_name == "transformers"
    assert card.data.tags == ["agentrl", "reinforcement-learning"]
    assert card.data.pipeline_tag == "text-generation"
    text = card.text.lstrip()
    assert text.startswith("# demo (step 3)")
    assert f"agentrl {agentrl.__version__}" in text and "`Qwen/Qwen2.5-0.5B-Instruct` for 3 steps" in text
    rows = {
        line.split("`")[1]: line.split("|")[2:4] for line in text.splitlines() if line.startswith("| ") and "`" in line
    }
    assert {k: (float(v), int(at)) for k, (v, at) in rows.items()} == {
        "eval/success": (0.5, 2),  # the last evaluation at or before step 3, not step 4's
        "reward/mean": (0.4, 3),
        "success/mean": (0.35, 3),
    }
    config_block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    assert tomllib.loads(config_block) == tomllib.loads((run_dir / "config.toml").read_text())


def test_a_shipped_policy_or_local_path_is_named_but_not_linked_as_base_model(tmp_path):
    local = tmp_path / "my-model"
    local.mkdir()
    for name in ("tiny", str(local)):
        card = ModelCard.load(write_model_card(local, base_model=name, step=2, metrics={"reward/mean": 0.5}))
        assert card.data.base_model is None
        assert f"from `{name}` for 2 steps" in card.text
    assert is_hub_id("Qwen/Qwen3-4B") and not is_hub_id("tiny") and not is_hub_id("a/b/c")


def test_a_lora_folder_is_a_peft_model(tmp_path):
    (tmp_path / "adapter_config.json").write_text("{}")
    card = ModelCard.load(write_model_card(tmp_path, base_model="Qwen/Qwen3-4B"))
    assert card.data.library_name == "peft" and card.data.base_model == "Qwen/Qwen3-4B"
