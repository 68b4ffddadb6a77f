"""The search toolsets through a real tool server: BM25 over a local corpus, and the optional web backend."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from agentrl.tools.search import Search, WebSearch, WebSearchConfig
from agentrl.tools.search.search import CORPUS_ENV, DEFAULT_CORPUS
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from agentrl.testing import serve_in_thread
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient, ToolServerError
from agentrl.types import ToolCall

pytestmark = pytest.mark.integration

DOCS = [
    {"id": "volcano", "title": "Volcanoes", "text": "A volcano erupts molten lava and ash. Volcanic eruptions " * 3},
    {"id": "glacier", "title": "Glaciers", "text": "Glaciers are slow rivers of ice that carve valleys."},
    {"id": "lava-lamp", "title": "Lava lamps", "text": "A lava lamp holds wax in liquid; it is not a volcano."},
    {"id": "long", "title": "A long document", "text": " ".join(f"word{i}" for i in range(600))},
    {"id": "bread", "title": "Baking bread", "text": "Knead the dough, let it rise, then bake the bread."},
]


@pytest.fixture
def corpus_path(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


async def call(session, name: str, **arguments):
    return await session.call(ToolCall(id="", name=name, arguments=arguments))


async def test_index_built_once_and_ranking(corpus_path: Path) -> None:
    toolset = Search.with_corpus(corpus_path, page_chars=1000)
    async with ToolClient(app=create_app([toolset])) as tools:
        sessions = [await tools.open_session() for _ in range(3)]
        results = await asyncio.gather(*(call(s, "search", query="volcanic eruption lava", k=3) for s in sessions))
        forked = await sessions[0].fork()
        assert (await call(forked, "search", query="glacier ice")).text.startswith("1. [glacier] Glaciers")
    assert toolset.index_builds == 1
    assert toolset.index() is toolset.index()
    text = results[0].text
    assert all(r.text == text and not r.is_error for r in results)
    ranked = [line.split("]")[0].split("[")[1] for line in text.splitlines() if line[:1].isdigit()]
    # Stemming matches "volcanic"/"eruption" to "eruptions"; the lava lamp shares only "lava" and "volcano".
    assert ranked == ["volcano", "lava-lamp"], text
    assert "molten lava" in text


async def test_open_document_pages(corpus_path: Path) -> None:
    toolset = Search.with_corpus(corpus_path, page_chars=1000)
    async with ToolClient(app=create_app([toolset])) as tools:
        session = await tools.open_session(["open_document"])
        pages = [await call(session, "open_document", doc_id="long", page=p) for p in range(1, 6)]
        short = await call(session, "open_document", doc_id="bread")
    assert pages[0].text.startswith("[long] A long document (page 1 of 5)\n\n")
    assert "open page 2 for more" in pages[0].text and "for more" not in pages[4].text
    bodies = [r.text.split("\n\n", 1)[1].split("\n(page")[0] for r in pages]
    assert all(len(b) <= 1000 for b in bodies)
    assert " ".join(bodies) == DOCS[3]["text"]  # cut between words, nothing lost or repeated
    assert short.text == "[bread] Baking bread (page 1 of 1)\n\n" + DOCS[4]["text"]


@pytest.mark.parametrize(
    ("name", "arguments", "error_type", "message"),
    [
        ("search", {"query": "lava", "k": 0}, "bad_arguments", "greater than or equal to 1"),
        ("search", {"query": "lava", "k": 21}, "bad_arguments", "less than or equal to 20"),
        ("search", {"k": 3}, "bad_arguments", "query"),
        ("search", {"query": ""}, "bad_arguments", "at least 1 character"),
        ("search", {"query": "the of and"}, "bad_arguments", "no searchable words"),
        ("search", {"query": "lava", "limit": 3}, "bad_arguments", "limit"),
        ("open_document", {"doc_id": "nope"}, "not_found", "no document with id 'nope'"),
        ("open_document", {"doc_id": "bread", "page": 2}, "bad_arguments", "has 1 page(s)"),
        ("open_document", {"doc_id": "bread", "page": 0}, "bad_arguments", "greater than or equal to 1"),
    ],
)
async def test_bad_arguments_are_typed_errors(corpus_path, name, arguments, error_type, message) -> None:
    async with ToolClient(app=create_app([Search.with_corpus(corpus_path)])) as tools:
        result = await call(await tools.open_session(), name, **arguments)
    assert result.is_error and result.error_type == error_type, result
    assert message in result.text


async def test_no_match_is_an_answer_not_an_error(corpus_path: Path) -> None:
    async with ToolClient(app=create_app([Search.with_corpus(corpus_path)])) as tools:
        result = await call(await tools.open_session(), "search", query="zeppelin")
    assert not result.is_error and result.text == "No documents match 'zeppelin'."


async def test_corpus_from_environment(corpus_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(CORPUS_ENV, str(corpus_path))
    toolset = type("EnvSearch", (Search,), {"index_builds": 0})
    async with ToolClient(app=create_app([toolset])) as tools:
        result = await call(await tools.open_session(), "search", query="bread dough")
    assert toolset.resolved_corpus_path() == corpus_path
    assert result.text.startswith("1. [bread] Baking bread")


async def test_bundled_corpus_over_uvicorn(monkeypatch) -> None:
    monkeypatch.delenv(CORPUS_ENV, raising=False)
    toolset = type("DefaultSearch", (Search,), {"index_builds": 0})
    with serve_in_thread(create_app([toolset])) as url:
        async with ToolClient(url) as tools:
            sessions = [await tools.open_session() for _ in range(2)]
            found = await call(sessions[0], "search", query="compress files with gzip", k=3)
            page = await call(sessions[1], "open_document", doc_id="py-gzip")
    assert toolset.resolved_corpus_path() == DEFAULT_CORPUS
    assert sum(1 for _ in DEFAULT_CORPUS.open()) >= 200
    assert toolset.index_builds == 1  # built at server startup, shared by both sessions
    assert "[py-gzip]" in found.text.splitlines()[0], found.text
    assert page.text.startswith("[py-gzip] gzip (Python standard library) (page 1 of 1)")


def web_api() -> tuple[FastAPI, list[dict[str, str]]]:
    """A stand-in search API: Brave-shaped answers, plus paths that fail in the ways real ones do."""
    app, seen = FastAPI(), []

    @app.get("/search")
    async def search(request: Request, q: str, count: int) -> dict:
        seen.append({"q": q, "count": str(count), "token": request.headers.get("x-subscription-token", "")})
        results = [
            {"title": f"Result {i} for {q}", "url": f"https://example.org/{i}", "description": f"about  {q}\n{i}"}
            for i in range(count + 2)
        ]
        return {"web": {"results": results}}

    @app.get("/slow")
    async def slow() -> dict:
        await asyncio.sleep(1.0)
        return {"results": []}

    @app.get("/broken")
    async def broken() -> JSONResponse:
        return JSONResponse({"error": "quota"}, status_code=500)

    @app.get("/odd")
    async def odd() -> PlainTextResponse:
        return PlainTextResponse('{"answer": 42}')

    return app, seen


async def test_web_search_backend() -> None:
    api, seen = web_api()
    with serve_in_thread(api) as base:

        def toolset(url: str, **kw) -> type[WebSearch]:
            return WebSearch.with_config(
                WebSearchConfig(url=url, api_key="k3y", key_header="X-Subscription-Token", **kw)
            )

        specs = {
            "ok": toolset(f"{base}/search"),
            "slow": toolset(f"{base}/slow", timeout_s=0.2),
            "broken": toolset(f"{base}/broken"),
            "odd": toolset(f"{base}/odd"),
            "down": toolset("http://127.0.0.1:9/search"),  # the discard port: nothing listens there
        }
        results = {}
        for label, spec in specs.items():
            async with ToolClient(app=create_app([spec])) as tools:
                results[label] = await call(await tools.open_session(), "web_search", query="tide tables", k=2)
    ok = results["ok"]
    assert not ok.is_error, ok
    assert ok.text == (
        "1. Result 0 for tide tables\n   https://example.org/0\n   about tide tables 0\n"
        "2. Result 1 for tide tables\n   https://example.org/1\n   about tide tables 1"
    )
    assert seen == [{"q": "tide tables", "count": "2", "token": "k3y"}]
    assert (results["slow"].error_type, results["broken"].error_type) == ("timeout", "failed")
    assert "timed out after 0.2s" in results["slow"].text and "HTTP 500" in results["broken"].text
    assert results["odd"].error_type == "failed" and "cannot read" in results["odd"].text
    assert results["down"].error_type == "failed" and "ConnectError" in results["down"].text
    assert all("k3y" not in r.text for r in results.values())


async def test_web_search_is_off_without_configuration(monkeypatch) -> None:
    monkeypatch.delenv("AGENTRL_WEB_SEARCH_URL", raising=False)
    toolset = type("EnvWebSearch", (WebSearch,), {"config": None})
    async with ToolClient(app=create_app([toolset])) as tools:
        result = await call(await tools.open_session(), "web_search", query="anything")
    assert result.is_error and result.error_type == "failed"
    assert "not configured" in result.text


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "No such file"), ('{"id": "a", "text": "ok"}\nnot json\n', ":2: not JSON"), ("", "has no documents")],
)
async def test_unusable_corpus_fails_session_start_clearly(tmp_path: Path, content, message) -> None:
    path = tmp_path / "corpus.jsonl"
    if content is not None:
        path.write_text(content)
    async with ToolClient(app=create_app([Search.with_corpus(path)])) as tools:
        with pytest.raises(ToolServerError, match=message):
            await tools.open_session()
