"""`ToolServerMetrics`: the Prometheus metrics of one tool server, in a registry of its own (several servers
may share a process, in tests and in-process training)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from agentrl.types import ToolResult

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class ToolServerMetrics:
    """Calls, errors by type, latency, queue time, sessions and sandboxes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.calls = Counter("agentrl_tool_calls", "Tool calls run", ["tool"], registry=r)
        self.errors = Counter(
            "agentrl_tool_errors", "Tool calls that returned an error", ["tool", "error_type"], registry=r
        )
        self.latency = Histogram(
            "agentrl_tool_call_seconds",
            "Tool call latency (running only)",
            ["tool"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.queue = Histogram(
            "agentrl_tool_queue_seconds",
            "Time a call waited for admission",
            ["toolset"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.refused = Counter(
            "agentrl_tool_calls_refused", "Calls refused because the queue was full", ["toolset"], registry=r
        )
        self.sessions = Gauge("agentrl_tool_sessions_active", "Open sessions", registry=r)
        self.sessions_expired = Counter("agentrl_tool_sessions_expired", "Sessions closed for being idle", registry=r)
        self.forks = Histogram(
            "agentrl_tool_fork_seconds", "Session fork latency", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.sandboxes = Gauge("agentrl_sandboxes_active", "Sandboxes running", registry=r)

    def observe(self, tool: str, result: ToolResult) -> None:
        self.calls.labels(tool).inc()
        self.latency.labels(tool).observe(result.elapsed_s)
        if result.is_error:
            self.errors.labels(tool, result.error_type or "unknown").inc()
