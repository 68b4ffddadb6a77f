"""`Search`: BM25 search over a local JSONL corpus, with the index built once per server process.

The corpus is the file named by `$AGENTRL_SEARCH_CORPUS`, or, without it, the bundled `default_corpus.jsonl`
(the module docstrings of the Python standard library). For another corpus in code, serve
`Search.with_corpus(path)`: each such class holds its own index.

    agentrl serve-tools --tools agentrl.tools.search:Search
    AGENTRL_SEARCH_CORPUS=wiki.jsonl agentrl serve-tools --tools agentrl.tools.search:Search

The index lives on the class, not on the per-session instances: `setup()` builds it once, in a worker thread,
before the first session, and every session of the process reads it. Sessions hold no state, so fork is free.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from pathlib import Path
from typing import Annotated, ClassVar

from agentrl.tools.search.corpus import Corpus
from agentrl.tools.search.index import BM25Index
from pydantic import Field

from agentrl.errors import ToolError
from agentrl.tool import tool

CORPUS_ENV = "AGENTRL_SEARCH_CORPUS"
"""Environment variable naming the JSONL corpus of `Search` (read when the index is built)."""
DEFAULT_CORPUS = Path(__file__).with_name("default_corpus.jsonl")
MAX_RESULTS = 20


class Search:
    """Search a document collection and read its documents page by page."""

    corpus_path: ClassVar[str | Path | None] = None
    """The JSONL corpus; None: `$AGENTRL_SEARCH_CORPUS`, else the bundled corpus."""
    page_chars: ClassVar[int] = 2000
    """Characters per page of `open_document`."""
    snippet_chars: ClassVar[int] = 200
    """Characters of text shown under each search result."""
    index_builds: ClassVar[int] = 0
    """How many times this class's index was built in this process (1 once set up)."""
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def with_corpus(cls, path: str | Path, *, page_chars: int | None = None) -> type[Search]:
        """A `Search` toolset class over the corpus at `path`, with an index of its own."""
        attributes = {"corpus_path": Path(path), "page_chars": page_chars or cls.page_chars, "index_builds": 0}
        return type(f"{cls.__name__}[{Path(path).name}]", (cls,), attributes)

    @classmethod
    async def setup(cls) -> None:
        """Build the index (once per class and process) off the event loop."""
        await asyncio.to_thread(cls.index)

    @classmethod
    def index(cls) -> BM25Index:
        """The class's index, built on first use; later calls return the same object."""
        built = cls.__dict__.get("_index")
        if built is not None:
            return built
        with Search._lock:
            built = cls.__dict__.get("_index")
            if built is None:
                built = BM25Index(Corpus.load(cls.resolved_corpus_path()))
                cls._index = built
                cls.index_builds = cls.__dict__.get("index_builds", 0) + 1
        return built

    @classmethod
    def resolved_corpus_path(cls) -> Path:
        return Path(cls.corpus_path or os.environ.get(CORPUS_ENV) or DEFAULT_CORPUS)

    @tool
    def search(
        self,
        query: Annotated[str, Field(min_length=1, max_length=2000)],
        k: Annotated[int, Field(ge=1, le=MAX_RESULTS)] = 5,
    ) -> str:
        """Search the document collection; returns the best matches with their ids and a snippet of each.

        Args:
            query: Keywords or a question.
            k: How many results to return (1 to 20).
        """
        index = self.index()
        terms = index.query_terms(query)
        if not terms:
            raise ToolError(
                f"query {query!r} has no searchable words (only stop words or punctuation)", error_type="bad_arguments"
            )
        hits = index.search(query, k)
        if not hits:
            return f"No documents match {query!r}."
        marks = re.findall(r"\w+", query) + terms
        lines = []
        for rank, hit in enumerate(hits, start=1):
            lines.append(f"{rank}. [{hit.document.id}] {hit.document.title}")
            lines.append(f"   {_snippet(hit.document.text, marks, self.snippet_chars)}")
        lines.append("Read a document with open_document(doc_id).")
        return "\n".join(lines)

    @tool
    def open_document(
        self,
        doc_id: Annotated[str, Field(min_length=1)],
        page: Annotated[int, Field(ge=1)] = 1,
    ) -> str:
        """Read a document found by search, one page at a time.

        Args:
            doc_id: The id shown in brackets in the search results.
            page: Which page to read, from 1.
        """
        doc = self.index().corpus.get(doc_id)
        if doc is None:
            raise ToolError(
                f"no document with id {doc_id!r}; use an id from the search results", error_type="not_found"
            )
        pages = doc.pages(self.page_chars)
        if page > len(pages):
            raise ToolError(
                f"document {doc_id!r} has {len(pages)} page(s); page {page} does not exist", error_type="bad_arguments"
            )
        more = f"\n(page {page} of {len(pages)}; open page {page + 1} for more)" if page < len(pages) else ""
        return f"[{doc.id}] {doc.title} (page {page} of {len(pages)})\n\n{pages[page - 1]}{more}"


def _snippet(text: str, words: list[str], chars: int) -> str:
    """About `chars` characters of `text` from shortly before the first place a query word (or stem) starts a word."""
    flat = " ".join(text.split())
    lowered = flat.lower()
    found = (re.search(rf"\b{re.escape(word.lower())}", lowered) for word in words if word)
    positions = [match.start() for match in found if match]
    start = max(0, min(positions) - chars // 4) if positions else 0
    if start:  # begin at a word boundary when one is near
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < start + 20 else start
    return ("…" if start else "") + flat[start : start + chars] + ("…" if start + chars < len(flat) else "")
