"""`--ray [ADDRESS]` on the command line, `ray.*` validation, and a missing Ray said in one line."""

from __future__ import annotations

import sys

import pytest

from agentrl.cli.train import ray_overrides
from agentrl.config import load_config
from agentrl.distributed.cluster import require_ray
from agentrl.errors import ConfigError, DependencyError


def test_an_address_after_ray_is_the_cluster_and_overrides_stay_overrides():
    assert ray_overrides(["10.0.0.1:6379", "trainer.steps=3"]) == [
        "trainer.steps=3",
        "ray.enabled=true",
        "ray.address=10.0.0.1:6379",
    ]
    assert ray_overrides(["trainer.steps=3"]) == ["trainer.steps=3", "ray.enabled=true"]
    assert ray_overrides([]) == ["ray.enabled=true"]
    config = load_config(None, ray_overrides(["auto", "ray.rollout_workers=4"]))
    assert (config.ray.enabled, config.ray.address, config.ray.rollout_workers) == (True, "auto", 4)


@pytest.mark.parametrize(
    "override", ["ray.rollout_workers=0", "ray.tool_servers=-1", "ray.reissue_attempts=0", "ray.learner_processes=-1"]
)
def test_impossible_ray_settings_are_refused(override):
    with pytest.raises(ConfigError, match="ray"):
        load_config(None, [override])


def test_a_missing_ray_is_one_line_saying_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(DependencyError, match=r"pip install 'agentrl\[ray\]'"):
        require_ray()
