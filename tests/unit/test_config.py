"""Config: defaults ← TOML ← dotted overrides, with clear errors; every field documented."""

import dataclasses

import pytest

from agentrl.config import RunConfig, dump_toml, field_docs, load_config
from agentrl.errors import ConfigError

pytestmark = pytest.mark.unit


def test_defaults_are_valid_and_derived_values_computed():
    cfg = load_config()
    assert cfg == RunConfig()
    assert cfg.rollout.trajectories_per_step == cfg.rollout.prompts_per_step * cfg.rollout.samples_per_prompt


def test_toml_then_overrides(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('scaffold = "code"\n[trainer]\nlr = 1e-5\nsteps = 3\n[rollout]\nsamples_per_prompt = 4\n')
    cfg = load_config(path, ["trainer.lr=3e-6", "rewards=exact_match,f1:0", "policy.lora_rank=8"])
    assert cfg.scaffold == "code"
    assert cfg.trainer.lr == 3e-6 and cfg.trainer.steps == 3
    assert cfg.rollout.samples_per_prompt == 4
    assert cfg.rewards == ("exact_match", "f1:0")
    assert cfg.policy.lora_rank == 8


def test_optional_and_bool_and_int_to_float():
    cfg = load_config(None, ["trainer.max_minutes=10", "tensorboard=false", "trainer.lr=1"])
    assert cfg.trainer.max_minutes == 10.0 and cfg.tensorboard is False and cfg.trainer.lr == 1.0
    assert load_config(None, ["trainer.max_minutes=none"]).trainer.max_minutes is None


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.lrr=1", "unknown config key 'trainer.lrr'; did you mean 'trainer.lr'"),
        ("trainer.setps=3", "unknown config key 'trainer.setps'; did you mean 'trainer.steps'"),
        ("trainr.steps=3", "unknown config key 'trainr'; did you mean 'trainer'"),
        ("zzz=1", "unknown config key 'zzz'; known: agent, checkpoint_every_steps"),
        ("rollout.max_turns=many", "rollout.max_turns expects int"),
        ("rollout.samples_per_prompt=1", "samples_per_prompt must be >= 2"),
        ("trainer=3", "is a section"),
        ("noequals", "key=value"),
    ],
)
def test_bad_values_fail_with_a_message(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_round_trip_through_toml(tmp_path):
    cfg = load_config(None, ["trainer.max_minutes=7.5", "rewards=exact_match", "name=x", "trainer.betas=[0.8, 0.9]"])
    path = tmp_path / "c.toml"
    path.write_text(dump_toml(cfg))
    assert load_config(path) == cfg


def test_every_field_has_help():
    rows = field_docs(RunConfig)
    assert len(rows) > 40
    undocumented = [name for name, _, doc in rows if not doc]
    assert undocumented == []


def test_configs_are_frozen():
    cfg = RunConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "overrides",
    [
        ["tasks=data/q.jsonl", "tasks.prompt_column=q", "tasks.test_fraction=0.25"],
        ["tasks.prompt_column=q", "tasks=data/q.jsonl", "tasks.test_fraction=0.25"],
        ["tasks.path=data/q.jsonl", "tasks.prompt_column=q", "tasks.test_fraction=0.25"],
    ],
)
def test_a_bare_task_source_is_short_for_its_path_in_either_order(overrides):
    tasks = load_config(None, overrides).tasks
    assert (tasks.path, tasks.prompt_column, tasks.test_fraction) == ("data/q.jsonl", "q", 0.25)
    assert tasks and not RunConfig().tasks  # `if config.tasks:` reads as "tasks were given"


def test_a_bare_task_source_in_toml_and_its_round_trip(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('scaffold = "react"\ntasks = "org/name"\n')
    cfg = load_config(path, ["tasks.answer_column=a"])
    assert (cfg.tasks.path, cfg.tasks.answer_column) == ("org/name", "a")
    path.write_text(dump_toml(cfg))
    assert load_config(path) == cfg
    from agentrl.config import EvalRunConfig

    assert load_config(None, ["tasks=x.parquet"], cls=EvalRunConfig).tasks.path == "x.parquet"


@pytest.mark.parametrize(
    "override, message",
    [("tasks.test_fraction=1.0", "test_fraction must be in"), ("tasks.prompt=q", "unknown config key 'tasks.prompt'")],
)
def test_bad_task_source_settings_fail_with_a_message(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, ["tasks=t.jsonl", override])


def test_a_toml_file_that_is_not_toml_is_one_config_error_naming_it(tmp_path):
    bad = tmp_path / "run.toml"
    bad.write_text("seed = 1\n[trainer\nsteps = 2\n")
    with pytest.raises(ConfigError, match=r"run\.toml: not valid TOML \(.*line 2"):
        load_config(bad)
    typo = tmp_path / "typo.toml"
    typo.write_text("[trainer]\nsetps = 2\n")
    with pytest.raises(ConfigError, match="did you mean 'trainer.steps'"):
        load_config(typo)


def test_the_local_files_a_run_names_are_stored_absolute(tmp_path, monkeypatch):
    from agentrl.config import run_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tasks.jsonl").write_text('{"prompt": "q", "answer": "a"}\n')
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "t.jinja").write_text("{{ messages }}")
    config = run_config(
        [
            "tasks=data/tasks.jsonl",
            "policy.model=ckpt",
            "policy.chat_template=t.jinja",
            "tool_server.sandbox.root_dir=.",
        ]
    )
    assert config.tasks.path == str(tmp_path / "data" / "tasks.jsonl")
    assert config.policy.model == str(tmp_path / "ckpt") and config.policy.chat_template == str(tmp_path / "t.jinja")
    assert config.tool_server.sandbox.root_dir == str(tmp_path)
    named = run_config(["tasks=org/dataset", "policy.model=tiny"])  # a hub id and a shipped name stay names
    assert named.tasks.path == "org/dataset" and named.policy.model == "tiny"
