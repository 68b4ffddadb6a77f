"""The house rules of the package layout (CONTRIBUTING.md): a short top level, modules under the size budget,
the core never importing the collections at module load, and no import cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "agentrl"
COLLECTIONS = ("agentrl.tools", "agentrl.scaffolds", "agentrl.rewards")
TINY_BUILD = "agentrl.tiny.build"
SIZE_EXCEPTIONS = {"agentrl/sandbox/worker.py"}
"""The in-sandbox worker runs as one file inside the sandbox, where agentrl is not importable."""
MAX_LINES = 400
MAX_TOP_LEVEL = 15


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core_modules() -> dict[str, Path]:
    return {module_name(p): p for p in CORE.rglob("*.py") if "__pycache__" not in p.parts}


def load_time_imports(path: Path, name: str) -> set[str]:
    """Modules a module imports when it is loaded: top-level statements only (not inside functions, and not
    under `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If) and not _is_type_checking(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)

    visit(tree.body)
    return found


def in_collections(module: str) -> bool:
    return any(module == c or module.startswith(c + ".") for c in COLLECTIONS)


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def test_the_top_level_is_what_a_newcomer_reads_first():
    top = sorted(p.stem for p in CORE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_modules_stay_under_the_size_budget():
    tracked = [p for d in ("agentrl", "tools", "scaffolds", "rewards") for p in (ROOT / d).rglob("*.py")]
    over = {
        str(p.relative_to(ROOT)): n
        for p in tracked
        if "repos" not in p.relative_to(ROOT).parts[:3] and (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert set(over) <= SIZE_EXCEPTIONS, over


def test_the_core_never_imports_the_collections_at_module_load():
    offenders = {}
    for name, path in core_modules().items():
        if name.startswith(TINY_BUILD):  # builds training data from the scaffolds' experts: it sits above them
            continue
        bad = sorted(m for m in load_time_imports(path, name) if in_collections(m))
        if bad:
            offenders[name] = bad
    assert not offenders, offenders


def test_nothing_outside_the_tiny_build_imports_it():
    for directory in ("agentrl", "tools", "scaffolds", "rewards"):
        for path in (ROOT / directory).rglob("*.py"):
            if path.is_relative_to(CORE / "tiny" / "build") or "repos" in path.parts:
                continue
            imported = {
                node.module if isinstance(node, ast.ImportFrom) else alias.name
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names
            }
            assert not any((m or "").startswith(TINY_BUILD) for m in imported), path


def test_the_core_has_no_import_cycles():
    modules = core_modules()
    graph = {
        name: sorted({m for m in load_time_imports(path, name) if m in modules and m != name})
        for name, path in modules.items()
    }
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(nxt) :] + [nxt]))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node)


def test_the_layout_checks_can_fail(tmp_path):
    """The import reader sees what the rules forbid (a guard against a check that passes vacuously)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\nimport agentrl.scaffolds.react\n"
        "if TYPE_CHECKING:\n    import agentrl.tools.code\n\ndef f():\n    import agentrl.rewards.outcome\n"
    )
    assert {m for m in load_time_imports(bad, "x.bad") if in_collections(m)} == {"agentrl.scaffolds.react"}
    assert not in_collections("agentrl.toolserver.app")


def test_every_data_file_is_declared_package_data():
    """Only the files pyproject.toml's package-data names ship besides the modules (include-package-data is off,
    so nothing rides in from a stale manifest): a data file under a room that no pattern names would be missing
    from the wheel while an editable install still finds it."""
    import tomllib

    setuptools_config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools_config["include-package-data"] is False
    rooms = {"agentrl": CORE, "agentrl.tools": ROOT / "tools", "agentrl.scaffolds": ROOT / "scaffolds"}
    rooms["agentrl.rewards"] = ROOT / "rewards"
    declared: set[Path] = set()
    for package, patterns in setuptools_config["package-data"].items():
        room = next(r for r in sorted(rooms, key=len, reverse=True) if package == r or package.startswith(r + "."))
        directory = rooms[room].joinpath(*package[len(room) :].split(".")[1:])
        assert directory.is_dir(), f"package-data names {package}, which has no directory"
        declared.update(p for pattern in patterns for p in directory.glob(pattern) if p.is_file())
    data = {
        p
        for directory in rooms.values()
        for p in directory.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    }
    assert data, "no data files found: the rooms moved?"
    assert not data - declared, sorted(str(p.relative_to(ROOT)) for p in data - declared)
