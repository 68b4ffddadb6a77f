"""litellm stays off the network at import: `import_litellm` sets `LITELLM_LOCAL_MODEL_COST_MAP` before litellm's
module is first imported, so its model cost map comes from the bundled file and no request for the remote map
is ever made. Each case runs in a fresh interpreter (litellm reads the switch once, at import) with HTTP spied
on; the same spy run on a bare `import litellm` shows it would have caught the fetch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

PROBE = """
import json, os, sys
import httpx

flag_at_import, requests = [], []


class WatchLitellm:
    # sees the environment at the moment litellm's module is first imported
    def find_spec(self, name, path=None, target=None):
        if name == "litellm" and not flag_at_import:
            flag_at_import.append(os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"))
        return None


def refuse(url):
    requests.append(str(url))
    raise httpx.ConnectError("no network in this test")


httpx.get = lambda url, *a, **k: refuse(url)
httpx.Client.send = lambda self, request, *a, **k: refuse(request.url)
sys.meta_path.insert(0, WatchLitellm())
IMPORT
from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info

print(json.dumps({
    "flag_at_import": flag_at_import[0] if flag_at_import else "not imported",
    "requests": requests,
    "models": len(litellm.model_cost),
    "source": get_model_cost_map_source_info()["source"],
    "forced": get_model_cost_map_source_info()["is_env_forced"],
}))
"""


def probe(import_line: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_OFFLINE_MODE")}
    code = PROBE.replace("IMPORT", import_line)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_litellm_uses_the_bundled_cost_map_and_requests_nothing():
    seen = probe("from agentrl.policy.chat_policy import import_litellm; litellm = import_litellm()")
    assert seen["flag_at_import"] == "True"
    assert seen["requests"] == []
    # populated from the file shipped with litellm
    assert seen["source"] == "local" and seen["forced"] and seen["models"] > 100


def test_the_probe_sees_a_bare_import_fetch_the_remote_map():
    seen = probe("import litellm")
    assert seen["flag_at_import"] is None
    assert any("model_prices_and_context_window" in url for url in seen["requests"]), seen["requests"]
