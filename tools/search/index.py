"""`BM25Index`: ranked retrieval over a `Corpus` with bm25s (stemmed with PyStemmer when it is installed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrl.tools.search.corpus import Corpus, Document


@dataclass(frozen=True)
class Hit:
    """One ranked document and its BM25 score (positive)."""

    document: Document
    score: float


class BM25Index:
    """A BM25 index of titles and texts. Building it is the expensive part; `search` only reads it."""

    def __init__(self, corpus: Corpus, *, language: str = "english") -> None:
        import bm25s

        if not len(corpus):
            raise ValueError(f"corpus {corpus.source} has no documents")
        self.corpus = corpus
        self._stemmer = _stemmer(language)
        texts = [f"{doc.title}\n{doc.text}" for doc in corpus]
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer, show_progress=False)
        self._retriever = bm25s.BM25()
        self._retriever.index(tokens, show_progress=False)

    def query_terms(self, query: str) -> list[str]:
        """The query's terms as the index knows them (stop words dropped, stemmed); unknown terms included."""
        import bm25s

        terms = bm25s.tokenize([query], stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False)
        return [t for t in terms[0] if t]

    def search(self, query: str, k: int) -> list[Hit]:
        """The top `k` documents with a positive score, best first; no terms in common gives no hits."""
        terms = self.query_terms(query)
        if not terms:
            return []
        k = min(k, len(self.corpus))
        ids_1_K, scores_1_K = self._retriever.retrieve([terms], k=k, show_progress=False, n_threads=1)
        return [
            Hit(self.corpus.documents[int(i)], float(s))
            for i, s in zip(ids_1_K[0], scores_1_K[0], strict=True)
            if s > 0
        ]


def _stemmer(language: str) -> Any:
    try:
        import Stemmer
    except ImportError:  # PyStemmer is optional: without it terms are matched unstemmed
        return None
    return Stemmer.Stemmer(language)
