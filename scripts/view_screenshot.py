"""Take the README's screenshot of `agentrl view`: a trajectory of a run, its tokens coloured by advantage, one
token hovered.

    python scripts/view_screenshot.py runs/<name> docs/view.png [--step 8]

Serves the run on a free loopback port in this process and drives Debian's chromium through Playwright, as the
view's tests do.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agentrl.tools.gui.launcher import CHROMIUM_ARGS, chromium_path

from agentrl.toolserver.thread_server import ThreadServer
from agentrl.view.app import create_app


def pick(run_dir: Path, step: int | None) -> tuple[str, int]:
    """A step file (the given step, else the newest) and a trained trajectory in it that called a tool."""
    files = sorted((run_dir / "trajectories").glob("step_*.jsonl"))
    path = run_dir / "trajectories" / f"step_{step:06d}.jsonl" if step is not None else files[-1]
    for index, line in enumerate(path.read_text().splitlines()):
        record = json.loads(line)
        turns = record["turns"]
        if len(turns) > 1 and turns[0]["tool_calls"] and turns[0].get("advantage") and record["reward"]:
            return path.name, index
    raise SystemExit(f"{path} has no trained trajectory with a tool call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--step", type=int, default=None)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    name, index = pick(args.run_dir, args.step)
    server = ThreadServer(create_app(args.run_dir))
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_ARGS))
            page = browser.new_page(viewport={"width": 1400, "height": 860}, device_scale_factor=1)
            page.goto(f"{server.url}/#/file/{name}/t/{index}")
            page.wait_for_selector(".turn .tok")
            page.click("details.observation summary")
            tokens = page.locator(".turns > .turn").first.locator(".tok")
            doubted = tokens.evaluate_all(  # the token the sampler was least sure of
                "ts => ts.reduce((b, t, i) => ((t.tokenInfo.entropy || 0) > (ts[b].tokenInfo.entropy || 0) ? i : b), 0)"
            )
            tokens.nth(doubted).hover()
            page.wait_for_selector("#tooltip:not([hidden])")
            page.screenshot(path=str(args.out))
            browser.close()
    finally:
        server.stop()
    print(f"wrote {args.out} ({name}, trajectory {index})")


if __name__ == "__main__":
    main()
