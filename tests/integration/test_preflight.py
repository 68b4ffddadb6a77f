"""Pre-run checks (`agentrl.doctor.preflight`): `agentrl train` and `agentrl eval` fail in seconds, before the model
loads, with one line saying what is missing and how to get it; a run whose needs are met passes them. Servers are
real ones on 127.0.0.1; a missing `bwrap` or chromium is a PATH or `AGENTRL_CHROMIUM` without one."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import time

import pytest
from typer.testing import CliRunner

from agentrl.builders import build_scaffold
from agentrl.cli import app
from agentrl.config import EvalRunConfig, load_config
from agentrl.doctor.preflight import check_eval, check_train
from agentrl.errors import ConfigError, SamplerError, ToolServerUnavailable
from agentrl.registry import load_scaffold
from agentrl.testing import echo, scripted_chat_app, serve_in_thread
from agentrl.toolserver.app import create_app

pytestmark = pytest.mark.integration

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed here")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output + result.stderr, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def train(tmp_path, *args: str):
    return CliRunner().invoke(app, ["train", *args, f"output_dir={tmp_path / 'runs'}", "progress=false"])


@pytest.fixture
def no_bwrap_on_path(tmp_path, monkeypatch):
    """A PATH holding only `python3`, as on a machine without bubblewrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(shutil.which("python3") or "/usr/bin/python3")
    monkeypatch.setenv("PATH", str(bin_dir))


def config(*overrides: str):
    cfg = load_config(None, list(overrides))
    return cfg, build_scaffold(cfg, cfg.rollout)


# --- failures -------------------------------------------------------------------------------------------------


def test_train_without_bwrap_names_bubblewrap_and_how_to_install_it(tmp_path, no_bwrap_on_path):
    result = train(tmp_path, "--scaffold", "terminal")
    line = one_error_line(result)
    assert result.exit_code == 2, line
    assert "scaffold 'terminal' runs model-written code in a sandbox" in line
    assert "bubblewrap (`bwrap`) is not installed: install the Debian package `bubblewrap`" in line


def test_bwrap_that_cannot_start_a_sandbox_is_reported_with_its_reason(tmp_path, monkeypatch):
    # bwrap is installed but the kernel forbids its namespaces (as in many containers): only starting one tells
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    result = train(tmp_path, "--scaffold", "swe")
    line = one_error_line(result)
    assert result.exit_code == 2, line
    assert "bubblewrap cannot start one here (bwrap: No permissions to create new namespace)" in line
    assert "tool_server.sandbox.backend=e2b" in line


def test_e2b_backend_without_a_key_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    result = train(tmp_path, "--scaffold", "terminal", "tool_server.sandbox.backend=e2b")
    line = one_error_line(result)
    assert result.exit_code == 2 and "E2B_API_KEY" in line


def test_unreachable_tool_server_fails_fast(tmp_path, no_bwrap_on_path):
    # the servers own their sandboxes: no bwrap here is no problem, the server that is not there is
    url = f"http://127.0.0.1:{closed_port()}"
    result = train(tmp_path, "--scaffold", "terminal", f"tool_servers={url}")
    line = one_error_line(result)
    assert result.exit_code == 1, line
    assert f"tool server {url} is not reachable: GET /health failed" in line and "fix tool_servers" in line


def test_tool_server_that_refuses_the_token_is_a_config_error():
    with serve_in_thread(create_app([echo], token="right")) as url:
        cfg, scaffold = config("scaffold=code", f"tool_servers={url}", "tool_server_token=wrong")
        with pytest.raises(ConfigError, match="refused tool_server_token"):
            check_train(cfg, scaffold)
        cfg, scaffold = config("scaffold=code", f"tool_servers={url}")
        with pytest.raises(ConfigError, match="requires a bearer token"):
            check_train(cfg, scaffold)


def test_unreachable_openai_backend_fails_fast(tmp_path):
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    result = train(tmp_path, "policy.backend=openai", f"policy.base_url={base_url}")
    line = one_error_line(result)
    assert result.exit_code == 1, line
    assert f"model server {base_url} (policy.base_url) is not reachable: GET /models failed" in line


def test_openai_backend_that_refuses_the_key_is_a_config_error():
    from fastapi import FastAPI, Header, HTTPException

    guarded = FastAPI()

    @guarded.get("/v1/models")
    async def models(authorization: str | None = Header(default=None)):
        if authorization != "Bearer sk-right":
            raise HTTPException(401, "bad key")
        return {"object": "list", "data": []}

    with serve_in_thread(guarded) as url:
        cfg, scaffold = config("policy.backend=openai", f"policy.base_url={url}/v1", "policy.api_key=sk-wrong")
        with pytest.raises(ConfigError, match=r"refused the API key \(HTTP 401 on GET /models\)"):
            check_train(cfg, scaffold)
        cfg, scaffold = config("policy.backend=openai", f"policy.base_url={url}/v1", "policy.api_key=sk-right")
        check_train(cfg, scaffold)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_backend_without_vllm_names_the_extra(tmp_path):
    result = train(tmp_path, "policy.backend=vllm")
    line = one_error_line(result)
    assert result.exit_code == 2 and "pip install 'agentrl[vllm]'" in line


def test_a_model_with_recurrent_layers_is_refused_by_the_in_process_sampler_before_its_weights_load(tmp_path):
    """LFM2 mixes convolution layers with attention: the in-process sampler's batched key-value cache cannot hold
    their state, so train stops in one line naming the backends that can (read off config.json: no weights)."""
    from agentrl.testing.families import save_family_model

    model = save_family_model("lfm2", tmp_path / "lfm2")
    for weights in model.glob("*.safetensors"):
        weights.unlink()
    result = train(tmp_path, "--model", str(model), "--scaffold", "code")
    line = one_error_line(result)
    assert result.exit_code == 2 and "lfm2 has conv layers" in line and "policy.backend=vllm" in line, line


def test_gui_scaffold_without_chromium_names_it(tmp_path, monkeypatch):
    pytest.importorskip("playwright.async_api")
    monkeypatch.setenv("AGENTRL_CHROMIUM", str(tmp_path / "no-chromium"))
    result = train(tmp_path, "--scaffold", "gui")
    line = one_error_line(result)
    assert result.exit_code == 2, line
    assert "scaffold 'gui' drives a browser (Browser), which cannot start: no chromium binary" in line
    assert "apt-get install chromium" in line


def test_eval_against_an_unreachable_endpoint_fails_fast(tmp_path):
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    args = ["eval", "--base-url", base_url, "--model", "Org/Some-Model", "--output", str(tmp_path / "r.jsonl")]
    result = CliRunner().invoke(app, args)
    line = one_error_line(result)
    assert result.exit_code == 1, line
    assert f"model server {base_url} (--base-url) is not reachable" in line
    assert not (tmp_path / "r.jsonl").exists()


def test_eval_of_a_sandboxed_scaffold_without_bwrap_names_bubblewrap(tmp_path, no_bwrap_on_path):
    with serve_in_thread(scripted_chat_app(lambda messages: "done")) as url:
        args = ["eval", "--scaffold", "terminal", "--base-url", url + "/v1", "--model", "Org/Some-Model"]
        result = CliRunner().invoke(app, [*args, "--output", str(tmp_path / "r.jsonl")])
    line = one_error_line(result)
    assert result.exit_code == 2 and "bubblewrap (`bwrap`) is not installed" in line


# --- needs met ------------------------------------------------------------------------------------------------


@needs_bwrap
def test_a_run_whose_needs_are_met_passes_quickly():
    cfg, scaffold = config("scaffold=terminal", "policy.model=tiny-extended")  # the stage that learned bash
    started = time.monotonic()
    check_train(cfg, scaffold)  # starts a throwaway sandbox: bwrap is not only installed but usable
    with (
        serve_in_thread(create_app([echo], token="t0k")) as tools_url,
        serve_in_thread(scripted_chat_app(lambda messages: "done")) as model_url,
    ):
        # a server without /v1/models still answers: gateways may serve only the completion routes
        cfg, scaffold = config(
            "scaffold=swe",
            f"tool_servers={tools_url},{tools_url}/",
            "tool_server_token=t0k",
            "policy.backend=openai",
            f"policy.base_url={model_url}/v1",
        )
        check_train(cfg, scaffold)
    assert time.monotonic() - started < 30  # loose: the checks take a fraction of a second here


@needs_bwrap
async def test_eval_checks_pass_for_a_reachable_endpoint_and_a_usable_sandbox():
    with serve_in_thread(scripted_chat_app(lambda messages: "done")) as url:
        cfg = EvalRunConfig(scaffold="terminal", model="Org/Some-Model", base_url=url + "/v1")
        await check_eval(cfg, load_scaffold("terminal"))


def test_failures_are_the_error_kinds_the_command_line_maps():
    # unreachable servers are infrastructure (exit 1), not something a setting alone fixes
    port = closed_port()
    cfg, scaffold = config(f"tool_servers=http://127.0.0.1:{port}")
    with pytest.raises(ToolServerUnavailable):
        check_train(cfg, scaffold)
    cfg, scaffold = config("policy.backend=openai", f"policy.base_url=http://127.0.0.1:{port}/v1")
    with pytest.raises(SamplerError):
        check_train(cfg, scaffold)
    cfg, scaffold = config("tool_servers=127.0.0.1:8000")
    with pytest.raises(ConfigError, match="is not an http"):
        check_train(cfg, scaffold)
