"""`Corpus`: the documents a search toolset serves, loaded from JSONL (`{"id", "title", "text"}` per line)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agentrl.errors import InputError


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
        """Read a JSONL corpus; a malformed line raises ValueError naming the file and the line."""
        path = Path(path)
        with path.open(encoding="utf-8") as lines:
            return cls(_parse(lines, str(path)), source=str(path))

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents)

    def get(self, doc_id: str) -> Document | None:
        return self._by_id.get(doc_id)


def _parse(lines: Iterable[str], source: str) -> Iterator[Document]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{source}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict) or record.get("id") in (None, "") or not isinstance(record.get("text"), str):
            raise InputError(f'{source}:{number}: expected {{"id", "title", "text"}} with a string text')
        yield Document(id=str(record["id"]), title=str(record.get("title") or record["id"]), text=record["text"])
