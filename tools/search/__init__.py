"""Search toolsets: `Search` (BM25 over a local JSONL corpus) and `WebSearch` (an HTTP search API, off unless
configured)."""

from agentrl.tools.search.corpus import Corpus, Document
from agentrl.tools.search.index import BM25Index
from agentrl.tools.search.search import Search
from agentrl.tools.search.web_search import WebSearch, WebSearchConfig

__all__ = ["BM25Index", "Corpus", "Document", "Search", "WebSearch", "WebSearchConfig"]
