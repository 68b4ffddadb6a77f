"""`WebSearch`: a web-search tool over an HTTP search API, off unless an endpoint is configured.

    AGENTRL_WEB_SEARCH_URL=https://search.example/api AGENTRL_WEB_SEARCH_KEY=... \\
        agentrl serve-tools --tools agentrl.tools.search:Search,agentrl.tools.search:WebSearch

The endpoint gets `GET URL?q=QUERY&count=K` with the key in a header (`Authorization: Bearer KEY` by default;
`AGENTRL_WEB_SEARCH_KEY_HEADER=X-Subscription-Token` sends the bare key in that header instead). The answer is
JSON holding a list of results under `results`, `web.results`, `organic` or `items` (SearXNG, Brave, Serper and
Google CSE shapes), each with a title, a URL (`url` or `link`) and a snippet (`snippet`, `description` or
`content`). Every failure (not configured, timeout, HTTP error, an answer of another shape) is a tool result
with `error_type` "timeout" or "failed"; nothing is raised into the rollout. The key never appears in results.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import httpx
from pydantic import Field

from agentrl.errors import ToolError
from agentrl.tool import tool

_RESULT_PATHS = (("results",), ("web", "results"), ("organic",), ("items",))


@dataclass(frozen=True)
class WebSearchConfig:
    """Where `WebSearch` sends queries; `from_env()` reads the `AGENTRL_WEB_SEARCH_*` variables."""

    url: str | None = None
    """Search endpoint (AGENTRL_WEB_SEARCH_URL); None turns web search off."""
    api_key: str | None = None
    """API key (AGENTRL_WEB_SEARCH_KEY), sent in `key_header`."""
    key_header: str = "Authorization"
    """Header carrying the key (AGENTRL_WEB_SEARCH_KEY_HEADER); `Authorization` sends `Bearer KEY`."""
    timeout_s: float = 10.0
    """Seconds a query may take (AGENTRL_WEB_SEARCH_TIMEOUT_S) before it fails with error_type `timeout`."""
    snippet_chars: int = 300
    """Characters of each result's snippet that reach the policy."""

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> WebSearchConfig:
        env = os.environ if environ is None else environ
        timeout = env.get("AGENTRL_WEB_SEARCH_TIMEOUT_S")
        return cls(
            url=env.get("AGENTRL_WEB_SEARCH_URL") or None,
            api_key=env.get("AGENTRL_WEB_SEARCH_KEY") or None,
            key_header=env.get("AGENTRL_WEB_SEARCH_KEY_HEADER") or "Authorization",
            timeout_s=float(timeout) if timeout else cls.timeout_s,
        )

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    def headers(self) -> dict[str, str]:
        if not self.api_key:
            return {}
        if self.key_header.lower() == "authorization":
            return {"Authorization": f"Bearer {self.api_key}"}
        return {self.key_header: self.api_key}


class WebSearch:
    """Search the web through the configured HTTP search API."""

    config: ClassVar[WebSearchConfig | None] = None
    """None: read from the environment when the server sets the toolset up (or at the first call)."""

    @classmethod
    def with_config(cls, config: WebSearchConfig) -> type[WebSearch]:
        """A `WebSearch` toolset class bound to `config` instead of the environment."""
        return type(f"{cls.__name__}[{config.url}]", (cls,), {"config": config})

    @classmethod
    def setup(cls) -> None:
        cls.resolved_config()

    @classmethod
    def resolved_config(cls) -> WebSearchConfig:
        if cls.config is None:
            cls.config = WebSearchConfig.from_env()
        return cls.config

    @tool
    async def web_search(
        self,
        query: Annotated[str, Field(min_length=1, max_length=2000)],
        k: Annotated[int, Field(ge=1, le=20)] = 5,
    ) -> str:
        """Search the web; returns titles, URLs and snippets of the top results.

        Args:
            query: What to search for.
            k: How many results to return (1 to 20).
        """
        config = self.resolved_config()
        if not config.enabled:
            raise ToolError("web search is not configured on this tool server (AGENTRL_WEB_SEARCH_URL is unset)")
        results = await _query(config, query, k)
        if not results:
            return f"No web results for {query!r}."
        lines = []
        for rank, item in enumerate(results[:k], start=1):
            lines.append(f"{rank}. {item['title']}\n   {item['url']}")
            if item["snippet"]:
                lines.append(f"   {item['snippet'][: config.snippet_chars]}")
        return "\n".join(lines)


async def _query(config: WebSearchConfig, query: str, k: int) -> list[dict[str, str]]:
    # A client per call: the tool server may run one app per event loop (tests, in-process use), and an
    # httpx client must not outlive the loop that made it.
    host = httpx.URL(config.url).host
    try:
        async with httpx.AsyncClient(timeout=config.timeout_s, headers=config.headers()) as client:
            response = await client.get(config.url, params={"q": query, "count": k})
    except httpx.TimeoutException:
        raise ToolError(f"web search at {host} timed out after {config.timeout_s:g}s", error_type="timeout") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"web search at {host} failed: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise ToolError(f"web search at {host} answered HTTP {response.status_code}")
    try:
        return _results(response.json())
    except ValueError as exc:
        raise ToolError(f"web search at {host} sent an answer this tool cannot read: {exc}") from None


def _results(body: Any) -> list[dict[str, str]]:
    """The result list of a search API's JSON answer, as `{"title", "url", "snippet"}` dicts."""
    for path in _RESULT_PATHS:
        node = body
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, list):
            return [_result(item) for item in node if isinstance(item, dict)]
    raise ValueError(f"no result list under any of {', '.join('.'.join(p) for p in _RESULT_PATHS)}")


def _result(item: dict[str, Any]) -> dict[str, str]:
    snippet = item.get("snippet") or item.get("description") or item.get("content") or ""
    return {
        "title": str(item.get("title") or "(untitled)"),
        "url": str(item.get("url") or item.get("link") or ""),
        "snippet": " ".join(str(snippet).split()),
    }
