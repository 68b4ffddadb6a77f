"""Every command reports what it raised as one line on stderr, with exit code 2 for what the user can fix and 1 for
infrastructure failures and surprises; `--debug` lets the traceback through."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from agentrl.cli import app
from agentrl.errors import ConfigError

pytestmark = pytest.mark.unit

FAILING_SCAFFOLDS = """
from agentrl.errors import TaskSetupError


class Infra:
    def __init__(self, rollout=None):
        raise TaskSetupError("the task's web app did not start")


class Surprise:
    def __init__(self, rollout=None):
        raise RuntimeError("boom")
"""


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output + result.stderr, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_user_errors_are_one_line_with_exit_code_2(tmp_path):
    cases = {
        ("train", "scaffold=nope"): "unknown scaffold 'nope'; known: agent, code",
        ("train", "trainer.lrr=1"): "unknown config key 'trainer.lrr'",
        ("train", "--resume", str(tmp_path)): "is not a run directory",
        ("eval", "--tasks", str(tmp_path / "missing.jsonl")): "does not exist",
        ("report", str(tmp_path)): "is it a run directory?",
        ("serve-tools", "--tools", "no_such_module.tools"): "cannot import 'no_such_module.tools'",
    }
    for args, message in cases.items():
        result = run(*args)
        assert result.exit_code == 2, (args, result.output, result.stderr)
        assert message in one_error_line(result), args


def test_bad_input_files_name_the_line(tmp_path):
    data = tmp_path / "conversations.jsonl"
    data.write_text('{"messages": []}\nnot json\n')
    result = run("sft", "--data", str(data), "--output", str(tmp_path / "out"))
    assert result.exit_code == 2 and one_error_line(result) == f"error: {data}:2: not JSON (Expecting value)"


def test_infrastructure_failures_and_surprises_exit_1(tmp_path, monkeypatch):
    (tmp_path / "failing_scaffolds.py").write_text(FAILING_SCAFFOLDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    infra = run("train", "scaffold=failing_scaffolds:Infra")
    assert infra.exit_code == 1 and one_error_line(infra) == "error: the task's web app did not start"
    surprise = run("train", "scaffold=failing_scaffolds:Surprise")
    assert surprise.exit_code == 1
    assert (
        one_error_line(surprise) == "error: unexpected RuntimeError: boom (run `agentrl --debug …` for the traceback)"
    )


def test_commands_that_exit_on_purpose_are_not_errors():
    result = run("train", "--help-config")
    assert result.exit_code == 0 and "trainer.lr" in result.output and not result.stderr


def test_debug_shows_the_traceback():
    result = run("--debug", "train", "scaffold=nope")
    assert isinstance(result.exception, ConfigError) and "unknown scaffold" in str(result.exception)
