# python examples/mcp_server.py              # an MCP server on stdio (what `--mcp "python …"` starts)
# python examples/mcp_server.py --http 9000  # the same on streamable HTTP: http://127.0.0.1:9000/mcp
"""An MCP server whose tools agentrl serves and trains on: unit conversion, written with the `mcp` package (2.x).

    agentrl serve-tools --mcp "python examples/mcp_server.py"                 # its tools over the tool server
    agentrl train scaffold=react "tools=mcp:python examples/mcp_server.py" tasks=tasks.jsonl ...

Two things in it decide how agentrl runs it:

- Every tool is annotated read-only (`readOnlyHint`): it changes nothing, so no session can see another's
  doing. agentrl then shares one server process among all sessions (`sessions="auto"` in `mcp_toolset`) instead of
  starting one per session, which costs about a second each. A server with a tool that keeps state per session
  (a tool that is not read-only) gets a process of its own per session; `mcp_toolset(..., sessions=...)` or
  `agentrl serve-tools --mcp-sessions` overrides either choice.
- A failure the tool expects raises `ToolError`: its message reaches the policy as the call's error. Any other
  exception is a crash: the SDK sends only "Error executing tool NAME", and agentrl tells the policy that the
  server gave no reason (the traceback is in the server's stderr).

`mcp` 2.x names the server class `MCPServer` (`mcp.server.mcpserver`); `mcp.server.fastmcp.FastMCP` is mcp 1.x.
"""

from __future__ import annotations

import sys
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

FACTORS = {
    ("km", "mi"): 0.621371,
    ("mi", "km"): 1.609344,
    ("kg", "lb"): 2.204623,
    ("lb", "kg"): 0.453592,
    ("m", "ft"): 3.280840,
    ("ft", "m"): 0.3048,
}
READ_ONLY = ToolAnnotations(readOnlyHint=True)

server = MCPServer("unit-conversion", log_level="WARNING")


@server.tool(annotations=READ_ONLY)
def convert(
    value: Annotated[float, Field(description="The number to convert.")],
    source: Annotated[str, Field(description="Unit of the value: km, mi, kg, lb, m or ft.")],
    target: Annotated[str, Field(description="Unit to convert to.")],
) -> str:
    """Convert a value from one unit to another, rounded to two decimals."""
    if (source, target) not in FACTORS:
        raise ToolError(f"cannot convert {source} to {target}; known pairs: {', '.join(map('→'.join, FACTORS))}")
    return f"{value * FACTORS[(source, target)]:.2f}"


@server.tool(annotations=READ_ONLY)
def units() -> list[str]:
    """The units `convert` knows."""
    return sorted({unit for pair in FACTORS for unit in pair})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
