"""Task sources: real `datasets` on disk, the hub cache offline, a real gateway recording, and a react run from
the command line on a dataset directory with mapped columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from agentrl.scaffolds.react import ReactScaffold

from agentrl.config import RolloutConfig
from agentrl.errors import InputError
from agentrl.rollout.chat import ChatFormat, template_mismatch
from agentrl.serve.app import create_app as create_gateway
from agentrl.serve.chat_completions import ChatService
from agentrl.serve.recorder import SessionRecorder
from agentrl.tasks import TaskSourceConfig, load_task_file, task_source
from agentrl.testing import ScriptedPolicy, echo, scripted_chat_app, serve_in_thread
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FEW_SHOT = [
    {"role": "system", "content": "Answer with a number."},
    {"role": "user", "content": "What is 1 + 1?"},
    {"role": "assistant", "content": "2"},
]


def saved(path: Path, columns: dict | None = None, **splits: dict) -> str:
    """A dataset written by `save_to_disk`: one table from `columns`, or a DatasetDict of `splits`."""
    if columns is not None:
        datasets.Dataset.from_dict(columns).save_to_disk(str(path))
    else:
        datasets.DatasetDict({k: datasets.Dataset.from_dict(v) for k, v in splits.items()}).save_to_disk(str(path))
    return str(path)


def test_a_saved_dataset_with_mapped_columns_and_a_seeded_hold_out(tmp_path):
    columns = {"q": [f"{k} * 3?" for k in range(10)], "a": [3 * k for k in range(10)], "uid": list(range(10))}
    columns["level"] = ["easy"] * 10
    config = TaskSourceConfig(
        path=saved(tmp_path / "ds", columns), prompt_column="q", answer_column="a", id_column="uid", test_fraction=0.3
    )
    tasks = load_task_file(config)
    assert [(t.id, t.prompt, t.answer) for t in tasks[:2]] == [("0", "0 * 3?", "0"), ("1", "1 * 3?", "3")]
    assert tasks[0].metadata == {"level": "easy"} and tasks[0].messages == ()
    held = [t.id for t in tasks if t.split == "test"]
    assert len(held) == 3 and held == [t.id for t in load_task_file(config) if t.split == "test"]
    other_seed = [t.id for t in load_task_file(TaskSourceConfig(**{**vars(config), "seed": 1})) if t.split == "test"]
    assert other_seed != held
    assert all(t.split == "train" for t in load_task_file(TaskSourceConfig(**{**vars(config), "test_fraction": 0})))


def test_a_dataset_dict_gives_its_train_and_test_splits(tmp_path):
    path = saved(
        tmp_path / "dd",
        train={"prompt": ["a", "b"], "answer": ["1", "2"]},
        test={"prompt": ["c"], "answer": ["3"]},
        validation={"prompt": ["d"], "answer": ["4"]},
    )
    source = task_source(TaskSourceConfig(path=path, test_fraction=0.5))  # a test split: nothing more held out
    assert [t.prompt for t in source("train")] == ["a", "b"] and [t.prompt for t in source("test")] == ["c"]
    assert [t.id for t in source("train")] == ["dd/train/0", "dd/train/1"]
    picked = task_source(TaskSourceConfig(path=path, train_split="validation", test_split="train"))
    assert [t.prompt for t in picked("train")] == ["d"] and [t.prompt for t in picked("test")] == ["a", "b"]
    with pytest.raises(InputError, match=r"has no split 'dev' \(tasks.test_split\); its splits: test, train, valid"):
        load_task_file(TaskSourceConfig(path=path, test_split="dev"))


def test_messages_open_the_task_and_a_trailing_reply_is_its_answer(tmp_path):
    rows = [
        [*FEW_SHOT, {"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}],
        [{"role": "user", "content": "What is 4 + 4?", "name": None}],  # columnar storage fills missing keys
    ]
    tasks = load_task_file(saved(tmp_path / "m", {"messages": rows, "answer": [None, "8"]}))
    assert tasks[0].messages == (*FEW_SHOT, {"role": "user", "content": "What is 2 + 3?"})
    assert (tasks[0].prompt, tasks[0].answer) == ("What is 2 + 3?", "5")
    assert tasks[1].messages == ({"role": "user", "content": "What is 4 + 4?"},) and tasks[1].answer == "8"
    # the conversational format of TRL: the prompt column holds messages
    (trl,) = load_task_file(saved(tmp_path / "trl", {"prompt": [rows[1]], "solution": ["8"]}))
    assert trl.prompt == "What is 4 + 4?" and len(trl.messages) == 1 and trl.metadata == {"solution": "8"}
    with pytest.raises(InputError, match="row 0: the messages hold no user message"):
        load_task_file(saved(tmp_path / "bad", {"messages": [[{"role": "system", "content": "x"}]]}))


@pytest.mark.parametrize("kind", ["jsonl", "json", "csv", "parquet", "directory"])
def test_files_of_every_format_and_a_directory_of_split_files(tmp_path, kind):
    rows = {"question": ["Capital of France?", "2 + 2?"], "answer": ["Paris", "4"], "split": ["train", "test"]}
    table = datasets.Dataset.from_dict(rows)
    if kind == "directory":
        (tmp_path / "d").mkdir()
        table.select([0]).to_json(tmp_path / "d" / "train.jsonl")
        table.select([1]).to_json(tmp_path / "d" / "test.jsonl")
        path = tmp_path / "d"
    else:
        path = tmp_path / f"t.{kind}"
        write = getattr(table, f"to_{'json' if kind == 'jsonl' else kind}")
        write(str(path), **({"lines": False} if kind == "json" else {}))
    source = task_source(path)
    assert [(t.prompt, t.answer) for t in source("train")] == [("Capital of France?", "Paris")]
    assert [(t.prompt, t.answer) for t in source("test")] == [("2 + 2?", "4")]


def test_bad_sources_fail_with_one_line_that_says_what_to_do(tmp_path):
    path = saved(tmp_path / "ds", {"q": ["x"], "a": ["y"]})
    with pytest.raises(InputError, match=r"has no column 'text' \(tasks.prompt_column\); its columns: q, a"):
        load_task_file(TaskSourceConfig(path=path, prompt_column="text"))
    with pytest.raises(InputError, match="has no prompt column: set tasks.prompt_column .*its columns: q, a"):
        load_task_file(path)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(InputError, match="empty.jsonl holds no tasks"):
        load_task_file(tmp_path / "empty.jsonl")
    with pytest.raises(InputError, match="cannot read tasks from .*empty"):
        load_task_file(TaskSourceConfig(path=saved(tmp_path / "empty", {"q": []}), prompt_column="q"))
    odd = saved(tmp_path / "odd", dev={"q": ["x"]}, validation={"q": ["y"]})
    with pytest.raises(InputError, match=r"holds no tasks in a train or test split \(its splits: dev, validation;"):
        load_task_file(TaskSourceConfig(path=odd, prompt_column="q"))
    (tmp_path / "t.txt").write_text("{}")
    with pytest.raises(InputError, match="unknown task file format '.txt'"):
        load_task_file(tmp_path / "t.txt")
    with pytest.raises(InputError, match="tasks.config names a configuration"):
        load_task_file(TaskSourceConfig(path=path, config="main"))


OFFLINE_LOAD = """
import sys
from agentrl.errors import InputError
from agentrl.tasks import TaskSourceConfig, load_task_file
try:
    tasks = load_task_file(TaskSourceConfig(path=sys.argv[1], prompt_column="q"))
except InputError as e:
    print("InputError:", e)
else:
    print([(t.id, t.prompt, t.split) for t in tasks])
"""


def offline_load(dataset_id: str, hf_home: Path) -> subprocess.CompletedProcess:
    """Load a hub dataset id in a fresh process (`datasets` reads the offline switch at import) with no network."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home)}
    env.pop("HF_DATASETS_CACHE", None), env.pop("HF_HUB_CACHE", None)
    return subprocess.run(
        [sys.executable, "-c", OFFLINE_LOAD, dataset_id], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_hub_id_offline_reads_the_hub_cache_or_says_how_to_fill_it(tmp_path):
    # the hub cache's own layout, as `hf download --repo-type dataset org/arith` leaves it
    repo = tmp_path / "hf" / "hub" / "datasets--org--arith"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    (snapshot / "train.jsonl").write_text(json.dumps({"q": "1 + 1?"}) + "\n" + json.dumps({"q": "2 + 2?"}))
    (snapshot / "test.jsonl").write_text(json.dumps({"q": "3 + 3?"}))
    done = offline_load("org/arith", tmp_path / "hf")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == str(
        [("arith/train/0", "1 + 1?", "train"), ("arith/train/1", "2 + 2?", "train"), ("arith/test/0", "3 + 3?", "test")]
    )
    missing = offline_load("org/elsewhere", tmp_path / "hf").stdout.strip().splitlines()
    assert len(missing) == 1 and missing[0].startswith("InputError: dataset 'org/elsewhere' is not in the local")
    assert "(offline mode is on)" in missing[0] and "hf download --repo-type dataset org/elsewhere" in missing[0]


# --- a gateway recording as a task source ------------------------------------------------------------------


CALL = '<tool_call>\n{"name": "echo", "arguments": {"text": "ping"}}\n</tool_call>'


def record_sessions(tokenizer, directory: Path) -> None:
    """Real client sessions through the recording gateway: two clients open with the same question, one with
    few-shot turns and a tool round, and one rewrites a model turn (its episode is no task)."""
    from openai import OpenAI

    policy = ScriptedPolicy(tokenizer, lambda prompt: "done" if "<tool_response>" in prompt else CALL)
    service = ChatService(policy, ("m",), recorder=SessionRecorder(tokenizer, directory))
    question = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "Echo ping."}]
    with serve_in_thread(create_gateway(service)) as url:
        for key in ("a", "b"):
            OpenAI(base_url=url + "/v1", api_key=key).chat.completions.create(model="m", messages=question)
        client = OpenAI(base_url=url + "/v1", api_key="c")
        opening = [*FEW_SHOT, {"role": "user", "content": "Echo pong."}]
        reply = client.chat.completions.create(model="m", messages=opening).choices[0].message
        call = reply.model_dump(exclude_none=True)
        history = [*opening, call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "pong"}]
        client.chat.completions.create(model="m", messages=history)
        call["tool_calls"][0]["function"]["arguments"] = json.dumps({"text": "edited"})
        history[-2] = call
        client.chat.completions.create(model="m", messages=history)  # a rewritten model turn


async def test_a_gateway_recording_gives_one_task_per_opening_and_react_replays_it(tmp_path, tiny_tokenizer):
    record_sessions(tiny_tokenizer, tmp_path / "gateway")
    tasks = task_source(tmp_path / "gateway")("train")
    assert [t.messages for t in tasks] == [
        ({"role": "system", "content": "Use the tools."}, {"role": "user", "content": "Echo ping."}),
        (*FEW_SHOT, {"role": "user", "content": "Echo pong."}),
    ]
    assert [t.metadata["recorded_episodes"] for t in tasks] == [2, 1]
    assert [t.prompt for t in tasks] == ["Echo ping.", "Echo pong."] and tasks[0].answer is None

    scaffold = ReactScaffold(tools=[echo], tasks=task_source(tmp_path / "gateway"), rollout=RolloutConfig())
    policy = ScriptedPolicy(tiny_tokenizer, [CALL, "done"])
    async with ToolClient(app=create_app([echo])) as tools:
        schemas = await tools.schemas(["echo"])
        for task in scaffold.tasks("train"):
            t = await scaffold.run(task, policy, tools, group_id="g", trajectory_id=task.id)
            chat = ChatFormat(tiny_tokenizer, schemas)
            assert list(t.messages[: len(task.messages)]) == list(task.messages)  # no system prompt added
            assert list(t.prompt_ids) == chat.prompt_ids(task.messages)
            assert template_mismatch(chat, t) is None and t.answer == "done"
            assert t.turns[0].tool_results[0].text.endswith("ping")
    # messages without a system prompt get the scaffold's
    (task,) = load_task_file(saved(tmp_path / "m", {"messages": [FEW_SHOT[1:]] * 1, "answer": ["2"]}))
    assert task.messages == (FEW_SHOT[1],) and task.answer == "2"
    opened = ReactScaffold(system_prompt="Be brief.").initial_messages(task)
    assert opened == [{"role": "system", "content": "Be brief."}, FEW_SHOT[1]]


# --- the command line ------------------------------------------------------------------------------------------


def test_eval_on_a_dataset_with_messages_sends_them_to_the_endpoint(tmp_path):
    from typer.testing import CliRunner

    from agentrl.cli.app import app

    opening = [*FEW_SHOT, {"role": "user", "content": "What is 20 + 22?"}]
    path = saved(tmp_path / "chat", {"conversation": [opening], "gold": ["42"]})
    server = scripted_chat_app(lambda messages: "42")
    with serve_in_thread(server) as url:
        args = ["eval", "--scaffold", "code", "--base-url", url + "/v1", "--model", "m", "--tasks", path]
        mapping = ["tasks.messages_column=conversation", "tasks.answer_column=gold"]
        result = CliRunner().invoke(app, [*args, "--output", str(tmp_path / "out.jsonl"), *mapping])
    assert result.exit_code == 0, result.output
    assert server.state.requests[0]["messages"][: len(opening)] == opening  # its own system prompt, few-shot turns
    (record,) = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert record["task_id"] == "chat/0" and record["success"]


def train_react(tmp_path: Path, *overrides: str) -> list[dict]:
    """One step of `agentrl train scaffold=react …` in a fresh process, offline; the step's trajectories."""
    args = [
        "scaffold=react", *overrides, "trainer.steps=1", "rollout.prompts_per_step=2", "rollout.samples_per_prompt=2",
        "rollout.max_turns=2", "eval.every_steps=0", "progress=false", "tensorboard=false", f"output_dir={tmp_path}",
        "name=run",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "agentrl.cli.app", "train", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in (tmp_path / "run" / "trajectories" / "step_000001.jsonl").open()]


def test_train_react_on_a_dataset_directory_with_mapped_columns(tmp_path):
    rows = {"q": [f"What is {a} * 37?" for a in range(101, 113)], "a": [str(a * 37) for a in range(101, 113)]}
    path = saved(tmp_path / "arith", rows)
    mapping = ["tasks.prompt_column=q", "tasks.answer_column=a", "tasks.test_fraction=0.25"]
    tools = "tools=examples.train_react_custom_tool:calculate"
    trajectories = train_react(tmp_path, tools, f"tasks={path}", *mapping)
    assert len(trajectories) == 4
    held_out = {t.id for t in load_task_file(TaskSourceConfig(path=path, prompt_column="q", test_fraction=0.25))
                if t.split == "test"}  # fmt: skip
    for t in trajectories:
        row = int(t["task_id"].removeprefix("arith/"))
        assert t["task_id"] not in held_out and t["messages"][1] == {"role": "user", "content": rows["q"][row]}
        assert t["reward_components"]["exact_match"] == float(t["answer"] == rows["a"][row])  # the mapped answer
    config = (tmp_path / "run" / "config.toml").read_text()
    assert 'prompt_column = "q"' in config and f'path = "{path}"' in config


def test_train_react_on_the_prompts_clients_sent_through_the_gateway(tmp_path, tiny_tokenizer):
    record_sessions(tiny_tokenizer, tmp_path / "gateway")
    openings = {t.id: list(t.messages) for t in load_task_file(tmp_path / "gateway")}
    # the tiny policy never learned `echo`: these trajectories show the plumbing, not learning
    echo = ("tools=agentrl.testing:echo", "policy.allow_unseen_tools=true")
    trajectories = train_react(tmp_path, *echo, f"tasks={tmp_path / 'gateway'}")
    assert len(trajectories) == 4 and {t["task_id"] for t in trajectories} == set(openings)
    for t in trajectories:
        assert t["messages"][: len(openings[t["task_id"]])] == openings[t["task_id"]]
