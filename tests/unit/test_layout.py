"""The house rules of the package layout (CONTRIBUTING.md): a short top level, modules under the size budget,
the core never importing the collections at module load, and no import cycles."""

from __future__ import annotations

import ast
from collections.abc import Iterable
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


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core_modules() -> dict[str, Path]:
    return modules_under(CORE)


def modules_under(package: Path, root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for p in package.rglob("*.py") if "__pycache__" not in p.parts}


def imported_modules(path: Path, name: str, *, at_load: bool) -> set[str]:
    """The modules a module imports (`a.b` and, for `from a.b import c`, `a.b.c` too, since `c` may be a module).

    With `at_load`, only what it imports when it is loaded: not inside functions. Otherwise every import it can
    run, function bodies included: an import inside a function ties the modules as surely as one at the top, it
    only runs later. Imports under `if TYPE_CHECKING:` never run and are left out of both. Modules loaded by
    name (`importlib.import_module`, the registry's import paths) are not seen.
    """
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(nodes: Iterable[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
            elif not (at_load and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
                visit(ast.iter_child_nodes(node))

    visit(tree.body)
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Module → the modules of `modules` it imports anywhere (see `imported_modules`)."""
    return {
        name: sorted({m for m in imported_modules(path, name, at_load=False) if m in modules and m != name})
        for name, path in modules.items()
    }


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """One import cycle of `graph` (`a -> b -> a` as `[a, b, a]`), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in graph:
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def in_collections(module: str) -> bool:
    return any(module == c or module.startswith(c + ".") for c in COLLECTIONS)


def _is_type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING`."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


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
        bad = sorted(m for m in imported_modules(path, name, at_load=True) if in_collections(m))
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
    """No import cycle in `agentrl/`, counting imports inside functions: a lazy import only postpones a cycle (the
    modules still cannot be understood, tested or moved one without the other)."""
    cycle = find_cycle(import_graph(core_modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


ROOMS_APART = {
    "agentrl.toolserver": ("agentrl.rollout",),  # a tool server knows no agent loop
    "agentrl.train": ("agentrl.rollout", "agentrl.config"),  # the learner reads `TrainerConfig`, not the run's
}


def test_rooms_keep_to_their_role():
    """What a room may not import, even inside a function (CONTRIBUTING.md, Layout)."""
    reaches = {}
    for name, path in core_modules().items():
        for room, apart in ROOMS_APART.items():
            if name == room or name.startswith(room + "."):
                found = imported_modules(path, name, at_load=False)
                bad = sorted(m for m in found if any(m == a or m.startswith(a + ".") for a in apart))
                if bad:
                    reaches[name] = bad
    assert not reaches, reaches


def test_the_layout_checks_can_fail(tmp_path):
    """The import reader sees what the rules forbid (a guard against a check that passes vacuously)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\nimport agentrl.scaffolds.react\n"
        "if TYPE_CHECKING:\n    import agentrl.tools.code\n\ndef f():\n    import agentrl.rewards.outcome\n"
    )
    at_load = {m for m in imported_modules(bad, "x.bad", at_load=True) if in_collections(m)}
    assert at_load == {"agentrl.scaffolds.react"}
    anywhere = {m for m in imported_modules(bad, "x.bad", at_load=False) if in_collections(m)}
    assert anywhere == {"agentrl.scaffolds.react", "agentrl.rewards.outcome"}
    assert not in_collections("agentrl.toolserver.app")


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("class B:\n    def m(self):\n        from ..c import f\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    modules = modules_under(package, tmp_path)
    assert find_cycle(import_graph(modules)) is None  # a TYPE_CHECKING import never runs
    (package / "c.py").write_text("def f():\n    import pkg.a\n")
    assert find_cycle(import_graph(modules)) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]


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
