"""`logging.*` (W&B): the config section on the command line, and the one-line error when wandb is missing."""

from __future__ import annotations

import sys

import pytest

from agentrl.config import LoggingConfig, RunConfig, dump_toml, load_config
from agentrl.errors import ConfigError, DependencyError
from agentrl.runlog.metrics import MetricsLogger

pytestmark = pytest.mark.unit


@pytest.fixture
def no_wandb(monkeypatch):
    """An environment without wandb: `import wandb` fails and `find_spec` finds nothing, as after uninstalling."""
    monkeypatch.setitem(sys.modules, "wandb", None)


def test_the_logging_section_reads_from_overrides_and_round_trips_through_toml(tmp_path):
    config = load_config(
        None,
        [
            "logging.wandb=true",
            "logging.wandb_tags=[grpo,search]",
            "logging.wandb_mode=offline",
            "logging.wandb_group=g",
        ],
    )
    assert config.logging == LoggingConfig(
        wandb=True, wandb_tags=("grpo", "search"), wandb_mode="offline", wandb_group="g"
    )
    assert config.tensorboard is True and config.progress is True  # the top-level keys stay where they were
    (tmp_path / "config.toml").write_text(dump_toml(config))
    assert load_config(tmp_path / "config.toml") == config
    assert RunConfig().logging.wandb is False


def test_an_unknown_wandb_mode_is_a_config_error():
    with pytest.raises(ConfigError, match="logging.wandb_mode must be one of online, offline, disabled"):
        load_config(None, ["logging.wandb_mode=sometimes"])


def test_train_preflight_names_the_pip_command_when_wandb_is_missing(no_wandb):
    from agentrl.doctor.preflight import check_train
    from agentrl.registry import load_scaffold

    config = load_config(None, ["scaffold=search", "logging.wandb=true"])
    with pytest.raises(DependencyError) as caught:
        check_train(config, load_scaffold("search", config.rollout))
    assert str(caught.value) == "logging.wandb=true needs wandb: pip install 'agentrl[wandb]'"


def test_without_wandb_the_preflight_passes_when_wandb_is_off(no_wandb):
    from agentrl.doctor.preflight import check_train
    from agentrl.registry import load_scaffold

    config = load_config(None, ["scaffold=search"])
    check_train(config, load_scaffold("search", config.rollout))


def test_a_metrics_logger_asked_for_wandb_without_it_says_how_to_install_it(tmp_path, no_wandb):
    with pytest.raises(DependencyError, match=r"pip install 'agentrl\[wandb\]'"):
        MetricsLogger(tmp_path, tensorboard=False, logging=LoggingConfig(wandb=True))
    with MetricsLogger(tmp_path, tensorboard=False, logging=LoggingConfig()) as metrics:  # off: wandb not needed
        metrics.log(1, {"reward/mean": 0.5})
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 1
