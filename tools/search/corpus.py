"""`Corpus`: the documents a search toolset serves, loaded from JSONL (`{"id", "title", "text"}` per line)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.errors import InputError
from agentrl.json_lines import read_json_lines


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str

    def pages(self, page_chars: int) -> list[str]:
        """The text cut into pages of at most `page_chars`, at whitespace where there is some (at least one page)."""
        pages: list[str] = []
        rest = self.text.strip()
        while len(rest) > page_chars:
            cut = max(rest.rfind("\n", 0, page_chars + 1), rest.rfind(" ", 0, page_chars + 1))
            cut = cut if cut > page_chars // 2 else page_chars  # no whitespace near the end: cut mid-word
            pages.append(rest[:cut].rstrip())
            rest = rest[cut:].lstrip()
        pages.append(rest)
        return pages


class Corpus:
    """Documents in file order, looked up by id; ids are unique."""

    def __init__(self, documents: Iterable[Document], *, source: str = "<memory>") -> None:
        self.source = source
        self.documents = list(documents)
        self._by_id: dict[str, Document] = {}
        for doc in self.documents:
            if doc.id in self._by_id:
                raise InputError(f"{source}: duplicate document id {doc.id!r}")
            self._by_id[doc.id] = doc

    @classmethod
    def load(cls, path: str | Path) -> Corpus:
        """Read a JSONL corpus; a malformed line raises an `InputError` naming the file and the line."""
        return cls(_documents(read_json_lines(path), str(path)), source=str(path))

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents)

    def get(self, doc_id: str) -> Document | None:
        return self._by_id.get(doc_id)


def _documents(rows: Iterable[tuple[int, dict[str, Any]]], source: str) -> Iterator[Document]:
    for number, record in rows:
        if record.get("id") in (None, "") or not isinstance(record.get("text"), str):
            raise InputError(f'{source}:{number}: expected {{"id", "title", "text"}} with a string text')
        yield Document(id=str(record["id"]), title=str(record.get("title") or record["id"]), text=record["text"])
