"""A crash below Python in the `agentrl` command (here a user's module that aborts the process as it is imported)
says where it happened: every thread's Python stack on stderr, not a bare signal."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from test_newcomer_cli import agentrl

pytestmark = pytest.mark.integration


def test_an_abort_prints_the_python_stack_it_happened_in(tmp_path: Path) -> None:
    (tmp_path / "aborting_tools.py").write_text('"""Tools whose import aborts."""\nimport os\n\nos.abort()\n')
    done = agentrl(tmp_path, "train", "tools=aborting_tools", f"output_dir={tmp_path}")
    assert done.returncode == -signal.SIGABRT, done.stderr[-3000:]
    assert "Fatal Python error: Aborted" in done.stderr
    assert 'aborting_tools.py", line 4 in <module>' in done.stderr, done.stderr[-3000:]
