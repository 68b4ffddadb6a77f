"""Rebuild the bundled default corpus: one document per documented module of the Python standard library.

    python -m agentrl.tools.search.build_default_corpus [OUTPUT.jsonl]

The documents are module docstrings read with `ast` from the source files (no module is imported, so nothing
runs), in sorted order, so the output depends only on the Python installation. The committed
`default_corpus.jsonl` was built with CPython 3.11; rebuild it when the bundled file should change.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path

MAX_TEXT_CHARS = 3000
"""Longer docstrings are cut at a paragraph boundary below this length, to keep the package small."""
_SKIPPED = ("test", "idlelib", "lib2to3", "tkinter", "turtledemo", "ensurepip", "pydoc_data", "this", "antigravity")


def documents() -> Iterator[dict[str, str]]:
    """`{"id", "title", "text"}` for every public, documented pure-Python standard-library module."""
    for name in sorted(n for n in sys.stdlib_module_names if not n.startswith("_") and n not in _SKIPPED):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        yield from _document(name, Path(spec.origin))
        for sub in sorted(pkgutil.iter_modules(spec.submodule_search_locations or []), key=lambda m: m.name):
            if sub.name.startswith("_") or sub.name in _SKIPPED or sub.ispkg:
                continue
            yield from _document(f"{name}.{sub.name}", Path(spec.submodule_search_locations[0]) / f"{sub.name}.py")


def _document(name: str, source: Path) -> Iterator[dict[str, str]]:
    try:
        doc = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8")))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return
    if not doc or len(doc) < 40:
        return
    yield {"id": f"py-{name}", "title": f"{name} (Python standard library)", "text": _shorten(doc)}


def _shorten(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    cut = text.rfind("\n\n", 0, MAX_TEXT_CHARS)
    return text[: cut if cut > 0 else MAX_TEXT_CHARS].rstrip()


def main() -> None:
    output = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("default_corpus.jsonl")
    docs = list(documents())
    output.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    print(f"wrote {len(docs)} documents to {output}")


if __name__ == "__main__":
    main()
