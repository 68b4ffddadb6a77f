"""Shared fixtures of the slow tier."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def one_process_run(tmp_path_factory) -> Callable[..., Path]:
    """`one_process_run(*overrides)`: the run directory of `agentrl train` in one process with these overrides
    (`test_data_parallel.SMALL` first), trained once per session and shared by the tests that compare with it.
    Tests read it and copy it, never write into it."""
    from test_data_parallel import train

    root = tmp_path_factory.mktemp("one_process")
    runs: dict[tuple[str, ...], Path] = {}

    def run(*overrides: str) -> Path:
        if overrides not in runs:
            name = f"run{len(runs)}"
            train(root, name, *overrides)
            runs[overrides] = root / name
        return runs[overrides]

    return run
