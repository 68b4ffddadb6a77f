"""The Hugging Face Hub from agentrl: `agentrl push` uploads a checkpoint's model folder, and
`policy.local_files_only` (default on under HF_HUB_OFFLINE) fails at once on a model that is not cached, without
a request.

The Hub is a double on 127.0.0.1 (`HF_ENDPOINT`) speaking the part of the Hub API `huggingface_hub` uses to create a
repository and a branch and to commit a folder: `POST /api/repos/create`, `/api/validate-yaml`,
`/api/models/{repo}/branch/{branch}`, `/api/models/{repo}/preupload/{revision}` and the NDJSON
`/api/models/{repo}/commit/{revision}`. It stores every file as a regular git blob (the real Hub sends weights
through its Xet storage instead, which needs its own storage server); it records every request it gets.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agentrl.config import TrainerConfig, dump_toml, load_config
from agentrl.errors import InputError
from agentrl.runlog.metrics import MetricsLogger
from agentrl.testing import serve_in_thread
from agentrl.testing.families import family_model
from agentrl.train.checkpoint import TrainerState, save_checkpoint
from agentrl.train.learner import Learner

pytestmark = pytest.mark.integration

TOKEN = "hf_writer"


class HubDouble:
    """Repositories as {repo_id: {revision: {path: bytes}}}, and the requests that reached it."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, dict[str, bytes]]] = {}
        self.created: list[dict] = []
        self.requests: list[tuple[str, str, str | None]] = []
        self.app = self._app()

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def authorise(request: Request, call_next):
            auth = request.headers.get("authorization")
            self.requests.append((request.method, request.url.path, auth))
            if request.url.path.startswith("/api/") and auth != f"Bearer {TOKEN}":
                return JSONResponse({"error": "Invalid credentials in Authorization header"}, status_code=401)
            return await call_next(request)

        @app.post("/api/repos/create")
        async def create(body: dict, request: Request):
            repo_id = f"{body['organization']}/{body['name']}"
            url = f"{str(request.base_url).rstrip('/')}/{repo_id}"
            if repo_id in self.repos:  # the Hub names the existing repository in its 409
                return JSONResponse({"error": "You already created this model repo", "url": url}, status_code=409)
            self.repos[repo_id] = {"main": {}}
            self.created.append(body)
            return {"url": url}

        @app.post("/api/validate-yaml")
        async def validate_yaml(body: dict):
            front = body["content"].split("---\n")[1]
            return {"errors": [], "warnings": []} if isinstance(yaml.safe_load(front), dict) else {"errors": ["no"]}

        @app.post("/api/models/{owner}/{name}/branch/{branch}")
        async def branch(owner: str, name: str, branch: str):
            revisions = self.repos[f"{owner}/{name}"]
            if branch in revisions:
                return JSONResponse({"error": "Reference already exists"}, status_code=409)
            revisions[branch] = dict(revisions["main"])
            return {}

        @app.post("/api/models/{owner}/{name}/preupload/{revision}")
        async def preupload(owner: str, name: str, revision: str, body: dict):
            if revision not in self.repos.get(f"{owner}/{name}", {}):
                return JSONResponse({"error": "Repository or revision not found"}, status_code=404)
            files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in body["files"]]
            return {"files": files, "commitOid": "0" * 40}

        @app.post("/api/models/{owner}/{name}/commit/{revision}")
        async def commit(owner: str, name: str, revision: str, request: Request):
            tree = self.repos.get(f"{owner}/{name}", {}).get(revision)
            if tree is None:
                return JSONResponse({"error": "Repository or revision not found"}, status_code=404)
            lines = [json.loads(line) for line in (await request.body()).splitlines() if line.strip()]
            assert lines[0]["key"] == "header"
            for line in lines[1:]:
                assert line["key"] == "file" and line["value"]["encoding"] == "base64", line["key"]
                tree[line["value"]["path"]] = base64.b64decode(line["value"]["content"])
            oid = hashlib.sha1(json.dumps(sorted(tree)).encode()).hexdigest()
            base = str(request.base_url).rstrip("/")
            return {"commitUrl": f"{base}/{owner}/{name}/commit/{oid}", "commitOid": oid}

        return app


@pytest.fixture
def hub():
    double = HubDouble()
    with serve_in_thread(double.app) as url:
        yield double, url


def hub_env(tmp_path: Path, url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_OFFLINE"))}
    return {**env, "HF_ENDPOINT": url, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_DISABLE_TELEMETRY": "1", **extra}


def agentrl(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentrl", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def run_dir(tmp_path):
    """A run directory with two checkpoints of a tiny random Qwen2, its config and its metrics."""
    run_dir = tmp_path / "demo"
    run_dir.mkdir()
    config = load_config(None, ["policy.model=Qwen/Qwen2.5-0.5B-Instruct", "scaffold=search"])
    (run_dir / "config.toml").write_text(dump_toml(config))
    model, tokenizer = family_model("qwen2")
    learner = Learner(model, TrainerConfig(), pad_token_id=tokenizer.pad_token_id)
    with MetricsLogger(run_dir, tensorboard=False) as metrics:
        for step in (1, 2):
            metrics.log(step, {"reward/mean": 0.25 * step, "eval/success": 0.5 * step})
            save_checkpoint(run_dir, TrainerState(step, float(step), step), model, tokenizer, learner)
    return run_dir


def test_push_uploads_the_latest_checkpoints_model_folder_with_its_card(hub, run_dir, tmp_path):
    double, url = hub
    env = hub_env(tmp_path, url)
    done = agentrl("push", str(run_dir), "alice/demo-agent", "--private", "--revision", "exp", "--token", TOKEN,
                   env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"to {url}/alice/demo-agent (exp, commit " in done.stdout

    [created] = double.created
    assert (created["organization"], created["name"], created["visibility"]) == ("alice", "demo-agent", "private")
    assert created.get("type", "model") == "model"
    policy = run_dir / "checkpoints" / "step_000002" / "policy"
    local = {p.relative_to(policy).as_posix(): p.read_bytes() for p in policy.rglob("*") if p.is_file()}
    uploaded = double.repos["alice/demo-agent"]["exp"]
    assert uploaded == local  # the loadable folder, byte for byte: no optimizer state, no trainer counters
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= set(uploaded)
    assert double.repos["alice/demo-agent"]["main"] == {}
    card = uploaded["README.md"].decode()
    assert "base_model: Qwen/Qwen2.5-0.5B-Instruct" in card and "- agentrl" in card and "# demo (step 2)" in card
    assert all(auth == f"Bearer {TOKEN}" for _, path, auth in double.requests if path.startswith("/api/"))

    # a checkpoint directory this time, to the repository that now exists
    checkpoint = run_dir / "checkpoints" / "step_000001"
    again = agentrl("push", str(checkpoint), "alice/demo-agent", "--token", TOKEN, env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert b"# demo (step 1)" in double.repos["alice/demo-agent"]["main"]["README.md"]


def test_a_rejected_token_is_one_line_saying_what_to_do(hub, run_dir, tmp_path):
    double, url = hub
    done = agentrl("push", str(run_dir), "alice/demo-agent", "--token", "hf_wrong", env=hub_env(tmp_path, url),
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the Hub refused"), done.stderr
    assert "--token" in lines[0] and "hf auth login" in lines[0]
    assert double.repos == {}


def test_push_names_what_it_could_not_find(tmp_path):
    from agentrl.cli.hub import model_folder

    (tmp_path / "empty_run" / "checkpoints").mkdir(parents=True)
    with pytest.raises(InputError, match="has no checkpoint yet"):
        model_folder(tmp_path / "empty_run")
    with pytest.raises(InputError, match="holds no model"):
        model_folder(tmp_path / "empty_run" / "checkpoints")
    (tmp_path / "exported" / "config.json").parent.mkdir()
    (tmp_path / "exported" / "config.json").write_text("{}")
    assert model_folder(tmp_path / "exported") == tmp_path / "exported"


# --- policy.local_files_only ------------------------------------------------------------------------------------

LOAD = """
import sys
from agentrl.config import PolicyConfig
from agentrl.policy.loading import load_model_and_tokenizer
setting = {"true": True, "false": False, "none": None}[sys.argv[1]]
try:
    load_model_and_tokenizer(PolicyConfig(model="nobody/not-cached", local_files_only=setting))
except Exception as e:
    print(type(e).__name__, e)
"""


def load_uncached(tmp_path: Path, url: str, setting: str, **env: str) -> str:
    done = subprocess.run([sys.executable, "-c", LOAD, setting], env=hub_env(tmp_path, url, **env), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_local_files_only_fails_at_once_with_the_download_command_and_no_request(hub, tmp_path):
    double, url = hub
    expected = (
        "InputError model 'nobody/not-cached' is not in the local hub cache and downloads are off "
        "(policy.local_files_only, or HF_HUB_OFFLINE); download it first: hf download nobody/not-cached"
    )
    assert load_uncached(tmp_path, url, "true") == expected  # asked for, with the hub reachable
    assert load_uncached(tmp_path, url, "none", HF_HUB_OFFLINE="1") == expected  # the default under HF_HUB_OFFLINE
    assert double.requests == []

    # the double sees what is asked of the hub: with downloads on, the same load goes there and fails
    out = load_uncached(tmp_path, url, "false")
    assert out.startswith("FileNotFoundError could not load model 'nobody/not-cached'"), out
    assert any("/nobody/not-cached/" in path for _, path, _ in double.requests)


def test_train_under_hf_hub_offline_stops_before_loading_with_one_line(hub, tmp_path):
    double, url = hub
    done = agentrl("train", "--scaffold", "search", "--model", "nobody/not-cached", "progress=false",
                   f"output_dir={tmp_path}", "name=run", env=hub_env(tmp_path, url, HF_HUB_OFFLINE="1"),
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "hf download nobody/not-cached" in lines[0], done.stderr
    assert double.requests == []
